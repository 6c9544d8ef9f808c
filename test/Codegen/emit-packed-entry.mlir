// RUN: par-opt %s --par-emit-packed-entry -split-input-file -verify-diagnostics | FileCheck %s

// Tests that each C interface gets one `par_packed_<name>(void **argv)`
// loading argv[i] and forwarding it (result pointer first, then one
// descriptor pointer per argument), and that meshes are removed.
// CHECK-NOT: par.mesh
// CHECK-LABEL: llvm.func @par_packed_f(%{{.*}}: !llvm.ptr)
// CHECK:         %[[S0:.*]] = llvm.getelementptr %{{.*}}[0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK:         %[[A0:.*]] = llvm.load %[[S0]] : !llvm.ptr -> !llvm.ptr
// CHECK:         %[[S1:.*]] = llvm.getelementptr %{{.*}}[1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK:         %[[A1:.*]] = llvm.load %[[S1]] : !llvm.ptr -> !llvm.ptr
// CHECK:         llvm.call @_mlir_ciface_f(%[[A0]], %[[A1]]) : (!llvm.ptr, !llvm.ptr) -> ()
// CHECK:         llvm.return
// CHECK-NOT: par_packed_ext
par.mesh @mesh ["dp"=2]
llvm.func @_mlir_ciface_f(%out: !llvm.ptr, %in: !llvm.ptr) {
  llvm.return
}
llvm.func @_mlir_ciface_ext(!llvm.ptr)

// -----

// Tests that an entry point with a non-pointer parameter is refused.
// expected-error @below {{entry point 'g' has non-tensor arguments or results; par_packed_ needs descriptors only}}
llvm.func @_mlir_ciface_g(%n: i64) {
  llvm.return
}

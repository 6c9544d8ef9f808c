// par-outline-kernels: every outermost kernel on buffers (a linalg op, a
// fused chain's scf.forall) becomes a call to a private function; kernels
// that print alike with their names left out (the two layers' GELU-like
// chains below, in two functions) are one function. Constants the kernel
// reads are cloned into it, other values are arguments; matmuls already
// turned into runtime calls and memref ops stay where they are.
// RUN: par-opt %s --par-outline-kernels=report=true | FileCheck %s
// RUN: par-opt %s --par-outline-kernels | FileCheck %s --check-prefix=IR
// RUN: par-opt %s --par-outline-kernels=profile=false | FileCheck %s --check-prefix=NOHOOKS
// RUN: par-opt %s --par-lower-cpu | FileCheck %s --check-prefix=LLVM
// RUN: par-opt %s --par-lower-cpu=outline-kernels=false | FileCheck %s --check-prefix=FLAT

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// CHECK: par-outline-kernels: kernels: 6 total, 4 distinct
// CHECK-NEXT: par_kernel_{{[0-9]+}}_forall: {{[0-9]+}} ops, 1 call

// IR-LABEL: func.func @layers
// IR-SAME:    (%[[A:.*]]: memref<8x16xf32>, %[[B:.*]]: memref<8x16xf32>, %{{.*}}: memref<f32>)
// IR:         %[[S:.*]] = memref.load
// IR:         call @[[GELU:par_kernel_0_generic]](%[[A]], %[[B]])
// IR-NEXT:    call @[[GELU]](%[[B]], %[[A]])
// IR-NEXT:    call @[[SCALE:par_kernel_1_generic]](%[[A]], %[[S]])
// IR-NEXT:    call @[[FILL:par_kernel_2_fill]](%[[B]])
// IR-NEXT:    return
// IR-LABEL: func.func @other
// IR:         call @[[GELU]]
// IR-NEXT:    call @[[ROWS:par_kernel_3_forall]]
// IR-NOT:   func.func @par_kernel
// IR:       func.func private @[[GELU]](%{{.*}}: memref<8x16xf32>, %{{.*}}: memref<8x16xf32>)
// IR-SAME:    no_inline
// IR-SAME:    par.kernel
// IR-NEXT:    %[[T:.*]] = call @par_rt_k_profile_begin() : () -> i64
// IR-NEXT:    %[[C:.*]] = arith.constant 5.000000e-01 : f32
// IR-NEXT:    linalg.generic
// IR:           arith.mulf %{{.*}}, %[[C]]
// The profiler's hooks (par-run --profile): the kernel's name and start.
// IR:         %[[N:.*]] = llvm.mlir.addressof @[[GELU]]_name
// IR-NEXT:    %[[P:.*]] = llvm.getelementptr %[[N]][0, 0]
// IR-NEXT:    call @par_rt_k_profile_end(%[[P]], %[[T]])
// IR-NEXT:    return
// IR:       func.func private @[[SCALE]](%{{.*}}: memref<8x16xf32>, %{{.*}}: f32)
// IR:       func.func private @[[FILL]]
// IR:         linalg.fill
// IR:       func.func private @[[ROWS]]
// IR:         scf.forall (%{{.*}}) in (4)

// The kernels stay out of line through the LLVM dialect; the entry points
// (sequences of calls) are inlined into their C interfaces, which are not
// optimised; without outlining the step holds the loops itself.
// LLVM-LABEL: llvm.func internal @layers
// LLVM-SAME:    always_inline
// LLVM:         llvm.call @par_kernel_0_generic
// LLVM-LABEL: llvm.func @_mlir_ciface_layers
// LLVM-SAME:    no_inline, optimize_none
// LLVM-LABEL: llvm.func internal @par_kernel_0_generic
// LLVM-SAME:    no_inline
// NOHOOKS-NOT: profile
// FLAT-NOT:   par_kernel
// FLAT-LABEL: llvm.func @layers
// FLAT:         llvm.fmul

func.func @layers(%a: memref<8x16xf32>, %b: memref<8x16xf32>, %sm: memref<f32>) {
  %half = arith.constant 0.5 : f32
  %s = memref.load %sm[] : memref<f32>
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a : memref<8x16xf32>) outs(%b : memref<8x16xf32>) {
  ^bb0(%x: f32, %y: f32):
    %e = arith.mulf %x, %half : f32
    linalg.yield %e : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%b : memref<8x16xf32>) outs(%a : memref<8x16xf32>) {
  ^bb0(%x: f32, %y: f32):
    %e = arith.mulf %x, %half : f32
    linalg.yield %e : f32
  }
  // Reads a value of the function: an argument of its kernel.
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%a : memref<8x16xf32>) {
  ^bb0(%y: f32):
    %e = arith.mulf %y, %s : f32
    linalg.yield %e : f32
  }
  linalg.fill ins(%zero : f32) outs(%b : memref<8x16xf32>)
  return
}

func.func @other(%a: memref<8x16xf32>, %b: memref<8x16xf32>, %r: memref<8xf32>) {
  %half = arith.constant 0.5 : f32
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a : memref<8x16xf32>) outs(%b : memref<8x16xf32>) {
  ^bb0(%x: f32, %y: f32):
    %e = arith.mulf %x, %half : f32
    linalg.yield %e : f32
  }
  // A fused chain's loop over blocks of rows: one kernel, the generic
  // inside it not a kernel of its own.
  scf.forall (%i) in (4) {
    %o = affine.apply affine_map<(d0) -> (d0 * 2)>(%i)
    %sa = memref.subview %b[%o, 0] [2, 16] [1, 1] : memref<8x16xf32> to memref<2x16xf32, strided<[16, 1], offset: ?>>
    %sr = memref.subview %r[%o] [2] [1] : memref<8xf32> to memref<2xf32, strided<[1], offset: ?>>
    linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%sa : memref<2x16xf32, strided<[16, 1], offset: ?>>) outs(%sr : memref<2xf32, strided<[1], offset: ?>>) {
    ^bb0(%x: f32, %acc: f32):
      %e = arith.addf %x, %acc : f32
      linalg.yield %e : f32
    }
  }
  return
}

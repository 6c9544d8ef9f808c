// RUN: par-opt %s --par-spmd --par-lower-cpu | FileCheck %s
// RUN: par-opt %s --par-spmd --par-lower-cpu | mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=LLVMIR

// Tests the whole CPU lowering of a Megatron MLP: pure LLVM dialect, matmuls
// through the runtime's BLAS kernel, the all_reduce as a runtime call, a C
// interface per entry point (the function itself internal, inlined into
// it) and one packed wrapper taking void**.
// CHECK-NOT:     par.mesh
// CHECK-DAG:     llvm.func @par_rt_k_matmul(i64, i64, i64, i64, i64, i64, i32, i32)
// CHECK-DAG:     llvm.func @par_rt_k_all_reduce(i64, i64, i64, i32, i32, i64)
// CHECK:         llvm.func internal @mlp(
// CHECK-COUNT-2: llvm.call @par_rt_k_matmul
// CHECK:         llvm.call @par_rt_k_all_reduce
// CHECK:         llvm.func @_mlir_ciface_mlp(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr)
// CHECK:         llvm.func @par_packed_mlp(%[[ARGV:.*]]: !llvm.ptr)
// CHECK-COUNT-4: llvm.load
// CHECK:         llvm.call @_mlir_ciface_mlp(
// LLVMIR: define void @par_packed_mlp(ptr
par.mesh @mesh ["tp"=4]
func.func @mlp(%x: tensor<8x16xf32>,
    %w1: tensor<16x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
    %w2: tensor<64x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> tensor<8x16xf32> {
  %c0 = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<8x64xf32>
  %f1 = linalg.fill ins(%c0 : f32) outs(%e1 : tensor<8x64xf32>) -> tensor<8x64xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<8x16xf32>, tensor<16x64xf32>) outs(%f1 : tensor<8x64xf32>) -> tensor<8x64xf32>
  %g = math.tanh %h : tensor<8x64xf32>
  %e2 = tensor.empty() : tensor<8x16xf32>
  %f2 = linalg.fill ins(%c0 : f32) outs(%e2 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %y = linalg.matmul ins(%g, %w2 : tensor<8x64xf32>, tensor<64x16xf32>) outs(%f2 : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// Tests a Megatron MLP with the batch over dp, on 8 ranks (dp=2 x tp=4):
// the sharded run matches the unsharded program on the same inputs.
// RUN: par-compile %s -o %t
// RUN: par-run -n 8 %t --verify --seed 3 | FileCheck %s
// CHECK: par-run: mlp on 8 ranks (mesh dp=2 tp=4)
// CHECK: rank 7:
// CHECK: result0 f32: max abs error {{.*}} OK
par.mesh @mesh ["dp"=2, "tp"=4]
func.func @mlp(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
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

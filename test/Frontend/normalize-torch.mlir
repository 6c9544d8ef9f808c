// RUN: par-opt %s --par-normalize-torch | FileCheck %s
// RUN: par-opt %S/../../examples/transformer_block_dp2_tp4.mlir > %t.block.mlir
// RUN: par-opt %S/../../examples/transformer_block_dp2_tp4.mlir --par-normalize-torch | diff - %t.block.mlir

// Tests the pipeline on a program par writes itself (the last two RUN
// lines: a transformer block comes out unchanged), and on torch's forms
// together: the MSE square expanded, the keepdim mean folded, all with
// par.param and shardings left on the arguments.
// CHECK-LABEL: func.func @mse(
// CHECK-SAME:    {par.param, par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-NOT:     math.fpowi
// CHECK:         arith.mulf %[[A:.*]], %[[A]] : f32
// CHECK:         linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}], iterator_types = ["parallel", "reduction"]} ins(%{{.*}} : tensor<4x8xf32>) outs(%{{.*}} : tensor<4xf32>)
par.mesh @mesh ["dp"=2]
func.func @mse(%x: tensor<4x8xf32> {par.param, par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<4x1xf32> {
  %c2 = arith.constant 2 : i64
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %sq = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %p = math.fpowi %in, %c2 : f32, i64
    linalg.yield %p : f32
  } -> tensor<4x8xf32>
  %e1 = tensor.empty() : tensor<4x1xf32>
  %f = linalg.fill ins(%c0 : f32) outs(%e1 : tensor<4x1xf32>) -> tensor<4x1xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>], iterator_types = ["parallel", "reduction"]} ins(%sq : tensor<4x8xf32>) outs(%f : tensor<4x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %in, %out : f32
    linalg.yield %a : f32
  } -> tensor<4x1xf32>
  return %s : tensor<4x1xf32>
}

// RUN: par-opt %s --pass-pipeline='builtin.module(func.func(par-fold-unit-dims))' | FileCheck %s --implicit-check-not=', 0)>'

// Tests that torch's keepdim mean and its broadcast (a constant-0 result
// in the indexing maps, which par-autodiff cannot transpose) lose the unit
// dimension: the reduction is over [4, 8] into [4], its init a fill of
// the folded shape (what a split reduction's partitioning needs), the
// broadcast reads [4] with a projected permutation, and the ops keep their
// par.stage.
// CHECK-DAG:   #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG:   #[[ROW:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @center
// CHECK:         %[[F:.*]] = linalg.fill {{.*}} -> tensor<4xf32>
// CHECK:         %[[S:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[ROW]]], iterator_types = ["parallel", "reduction"]}
// CHECK-SAME:      outs(%[[F]] : tensor<4xf32>) attrs = {par.stage = 1 : i64}
// CHECK:         linalg.generic {indexing_maps = [#[[ID]], #[[ROW]], #[[ID]]], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME:      ins(%{{.*}}, %[[S]] : tensor<4x8xf32>, tensor<4xf32>)
// CHECK-SAME:      attrs = {par.stage = 1 : i64}
func.func @center(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c0 = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<4x1xf32>
  %f = linalg.fill ins(%c0 : f32) outs(%e1 : tensor<4x1xf32>) -> tensor<4x1xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<4x8xf32>) outs(%f : tensor<4x1xf32>) attrs = {par.stage = 1 : i64} {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %in, %out : f32
    linalg.yield %a : f32
  } -> tensor<4x1xf32>
  %e = tensor.empty() : tensor<4x8xf32>
  %d = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x, %s : tensor<4x8xf32>, tensor<4x1xf32>) outs(%e : tensor<4x8xf32>) attrs = {par.stage = 1 : i64} {
  ^bb0(%in: f32, %m: f32, %out: f32):
    %b = arith.subf %in, %m : f32
    linalg.yield %b : f32
  } -> tensor<4x8xf32>
  return %d : tensor<4x8xf32>
}

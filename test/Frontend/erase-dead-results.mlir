// RUN: par-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(par-erase-dead-results))' | FileCheck %s

// Tests that torch's max + argmax reduction (log_softmax's amax) loses its
// unused argmax: its init, the select, the index computation go; the max
// stays a one-result maximumf reduction with the op's par.stage.
// CHECK-LABEL: func.func @amax
// CHECK:         %[[R:.*]] = linalg.generic
// CHECK-SAME:      iterator_types = ["parallel", "reduction"]
// CHECK-SAME:      outs(%{{.*}} : tensor<4xf32>)
// CHECK-SAME:      attrs = {par.stage = 0 : i64}
// CHECK-NEXT:    ^bb0(%[[IN:.*]]: f32, %[[OUT:.*]]: f32):
// CHECK-NEXT:      %[[M:.*]] = arith.maximumf %[[IN]], %[[OUT]] : f32
// CHECK-NEXT:      linalg.yield %[[M]] : f32
// CHECK-NEXT:    } -> tensor<4xf32>
// CHECK:         return %[[R]]
func.func @amax(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %c0 = arith.constant 0 : i64
  %e = tensor.empty() : tensor<4xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %ei = tensor.empty() : tensor<4xi64>
  %i0 = linalg.fill ins(%c0 : i64) outs(%ei : tensor<4xi64>) -> tensor<4xi64>
  %r:2 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<4x8xf32>) outs(%m0, %i0 : tensor<4xf32>, tensor<4xi64>) attrs = {par.stage = 0 : i64} {
  ^bb0(%in: f32, %out: f32, %out_i: i64):
    %k = linalg.index 1 : index
    %k64 = arith.index_cast %k : index to i64
    %mx = arith.maximumf %in, %out : f32
    %gt = arith.cmpf ogt, %in, %out : f32
    %sel = arith.select %gt, %k64, %out_i : i64
    linalg.yield %mx, %sel : f32, i64
  } -> (tensor<4xf32>, tensor<4xi64>)
  return %r#0 : tensor<4xf32>
}

// -----

// Tests that a result that is used stays, and that an unused result whose
// accumulator a kept result reads stays too.
// CHECK-LABEL: func.func @kept
// CHECK:         linalg.generic
// CHECK-SAME:      outs(%{{.*}}, %{{.*}} : tensor<4xf32>, tensor<4xf32>)
// CHECK:         linalg.yield %{{.*}}, %{{.*}} : f32, f32
func.func @kept(%x: tensor<4x8xf32>, %a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %r:2 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<4x8xf32>) outs(%a, %b : tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%in: f32, %o0: f32, %o1: f32):
    %s = arith.addf %in, %o1 : f32
    %t = arith.mulf %in, %o1 : f32
    linalg.yield %s, %t : f32, f32
  } -> (tensor<4xf32>, tensor<4xf32>)
  return %r#0 : tensor<4xf32>
}

// RUN: par-opt %s --par-fuse-elementwise | FileCheck %s

// Tests that an elementwise chain becomes one generic, while a matmul stays
// a named op and a producer with two users is not fused.
// CHECK-LABEL: func.func @chain
// CHECK:         linalg.matmul
// CHECK:         %[[SHARED:.*]] = linalg.generic
// CHECK:           arith.mulf
// CHECK:         linalg.generic {{.*}} ins(%[[SHARED]]
// CHECK:           arith.addf
// CHECK:           math.tanh
// CHECK-NOT:     linalg.generic
// CHECK:         return
#id = affine_map<(i, j) -> (i, j)>
func.func @chain(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>, %c: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %m = linalg.matmul ins(%a, %b : tensor<4x4xf32>, tensor<4x4xf32>) outs(%c : tensor<4x4xf32>) -> tensor<4x4xf32>
  %e = tensor.empty() : tensor<4x4xf32>
  %0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%m : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.mulf %x, %x : f32
    linalg.yield %y : f32
  } -> tensor<4x4xf32>
  %1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%0 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.addf %x, %x : f32
    linalg.yield %y : f32
  } -> tensor<4x4xf32>
  %2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%1 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = math.tanh %x : f32
    linalg.yield %y : f32
  } -> tensor<4x4xf32>
  return %0, %2 : tensor<4x4xf32>, tensor<4x4xf32>
}

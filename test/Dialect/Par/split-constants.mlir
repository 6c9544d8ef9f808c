// RUN: par-opt %s --par-split-constants -split-input-file | FileCheck %s

// Tests that a fill shared by two matmuls is cloned, with its own empty, so
// that each use can be sharded on its own.
// CHECK-LABEL: func.func @shared_fill
// CHECK-COUNT-2: tensor.empty() : tensor<8x8xf32>
// CHECK-NOT:     tensor.empty
// CHECK:         %[[F1:.*]] = linalg.fill
// CHECK:         %[[F2:.*]] = linalg.fill
// CHECK:         linalg.matmul {{.*}} outs(%[[F1]] :
// CHECK:         linalg.matmul {{.*}} outs(%[[F2]] :
func.func @shared_fill(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x8xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %0 = linalg.matmul ins(%a, %b : tensor<8x8xf32>, tensor<8x8xf32>) outs(%z : tensor<8x8xf32>) -> tensor<8x8xf32>
  %1 = linalg.matmul ins(%b, %a : tensor<8x8xf32>, tensor<8x8xf32>) outs(%z : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %0, %1 : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// Tests that splat constants and splats are cloned per use, and that a
// non-splat constant and an op with one use are left alone.
// CHECK-LABEL: func.func @constants
// CHECK-COUNT-2: arith.constant dense<1.000000e+00> : tensor<4xf32>
// CHECK-COUNT-1: arith.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]>
// CHECK-COUNT-2: tensor.splat
func.func @constants(%a: tensor<4xf32>, %f: f32) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %s = arith.constant dense<1.0> : tensor<4xf32>
  %d = arith.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %p = tensor.splat %f : tensor<4xf32>
  %0 = arith.addf %a, %s : tensor<4xf32>
  %1 = arith.mulf %a, %s : tensor<4xf32>
  %2 = arith.addf %a, %d : tensor<4xf32>
  %3 = arith.mulf %a, %d : tensor<4xf32>
  %4 = arith.addf %a, %p : tensor<4xf32>
  %5 = arith.mulf %a, %p : tensor<4xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

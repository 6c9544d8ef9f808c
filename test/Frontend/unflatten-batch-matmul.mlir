// RUN: par-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(par-unflatten-batch-matmul))' | FileCheck %s

// Tests that torch-mlir's 4-d matmul (attention's q @ k^T: both operands
// collapsed [[0, 1], [2], [3]], a batch_matmul over batch x heads, the
// result expanded back) becomes one generic over batch, heads, m, n and the
// contraction on the uncollapsed operands, keeping par.stage; the
// collapses, the batch_matmul and the expand are gone.
// CHECK-DAG:   #[[A:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
// CHECK-DAG:   #[[B:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>
// CHECK-DAG:   #[[R:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
// CHECK-LABEL: func.func @attention_scores
// CHECK-SAME:    (%[[Q:.*]]: tensor<8x4x16x8xf32>, %[[K:.*]]: tensor<8x4x8x16xf32>)
// CHECK:         %[[Z:.*]] = linalg.fill {par.stage = 1 : i64} {{.*}} -> tensor<8x4x16x16xf32>
// CHECK:         %[[G:.*]] = linalg.generic {indexing_maps = [#[[A]], #[[B]], #[[R]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
// CHECK-SAME:      ins(%[[Q]], %[[K]] : tensor<8x4x16x8xf32>, tensor<8x4x8x16xf32>) outs(%[[Z]] : tensor<8x4x16x16xf32>) attrs = {par.stage = 1 : i64}
// CHECK:           arith.mulf
// CHECK:           arith.addf
// CHECK-NOT:     collapse_shape
// CHECK-NOT:     batch_matmul
// CHECK-NOT:     expand_shape
// CHECK:         return %[[G]]
func.func @attention_scores(%q: tensor<8x4x16x8xf32>, %k: tensor<8x4x8x16xf32>) -> tensor<8x4x16x16xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %a = tensor.collapse_shape %q [[0, 1], [2], [3]] : tensor<8x4x16x8xf32> into tensor<32x16x8xf32>
  %b = tensor.collapse_shape %k [[0, 1], [2], [3]] : tensor<8x4x8x16xf32> into tensor<32x8x16xf32>
  %e = tensor.empty() : tensor<32x16x16xf32>
  %z = linalg.fill ins(%cst : f32) outs(%e : tensor<32x16x16xf32>) -> tensor<32x16x16xf32>
  %m = linalg.batch_matmul {par.stage = 1 : i64} ins(%a, %b : tensor<32x16x8xf32>, tensor<32x8x16xf32>) outs(%z : tensor<32x16x16xf32>) -> tensor<32x16x16xf32>
  %r = tensor.expand_shape %m [[0, 1], [2], [3]] output_shape [8, 4, 16, 16] : tensor<32x16x16xf32> into tensor<8x4x16x16xf32>
  return %r : tensor<8x4x16x16xf32>
}

// -----

// Tests that a batch_matmul whose result is used flat (no expand back)
// stays as it is.
// CHECK-LABEL: func.func @used_flat
// CHECK:         linalg.batch_matmul
func.func @used_flat(%q: tensor<8x4x16x8xf32>, %k: tensor<8x4x8x16xf32>) -> tensor<32x16x16xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %a = tensor.collapse_shape %q [[0, 1], [2], [3]] : tensor<8x4x16x8xf32> into tensor<32x16x8xf32>
  %b = tensor.collapse_shape %k [[0, 1], [2], [3]] : tensor<8x4x8x16xf32> into tensor<32x8x16xf32>
  %e = tensor.empty() : tensor<32x16x16xf32>
  %z = linalg.fill ins(%cst : f32) outs(%e : tensor<32x16x16xf32>) -> tensor<32x16x16xf32>
  %m = linalg.batch_matmul ins(%a, %b : tensor<32x16x8xf32>, tensor<32x8x16xf32>) outs(%z : tensor<32x16x16xf32>) -> tensor<32x16x16xf32>
  return %m : tensor<32x16x16xf32>
}

// -----

// Tests GQA's p @ v: v repeated over the heads of its key/value group is
// collapsed from [batch, kv heads, repeats, s, d], the probabilities from
// [batch, heads, s, s]. The common batch shape is [batch, kv heads,
// repeats]: the probabilities are expanded to it (heads split into kv heads
// x repeats), the generic runs over it, and its result is collapsed back to
// [batch, heads, s, d].
// CHECK-LABEL: func.func @gqa_values
// CHECK-SAME:    (%[[P:.*]]: tensor<8x4x16x16xf32>, %[[V:.*]]: tensor<8x2x2x16x8xf32>)
// CHECK:         %[[PE:.*]] = tensor.expand_shape %[[P]] {{\[\[}}0], [1, 2], [3], [4]] output_shape [8, 2, 2, 16, 16]
// CHECK:         %[[G:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction"]}
// CHECK-SAME:      ins(%[[PE]], %[[V]] : tensor<8x2x2x16x16xf32>, tensor<8x2x2x16x8xf32>)
// CHECK:         %[[R:.*]] = tensor.collapse_shape %[[G]] {{\[\[}}0], [1, 2], [3], [4]] : tensor<8x2x2x16x8xf32> into tensor<8x4x16x8xf32>
// CHECK-NOT:     batch_matmul
// CHECK:         return %[[R]]
func.func @gqa_values(%p: tensor<8x4x16x16xf32>, %v: tensor<8x2x2x16x8xf32>) -> tensor<8x4x16x8xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %a = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<8x4x16x16xf32> into tensor<32x16x16xf32>
  %b = tensor.collapse_shape %v [[0, 1, 2], [3], [4]] : tensor<8x2x2x16x8xf32> into tensor<32x16x8xf32>
  %e = tensor.empty() : tensor<32x16x8xf32>
  %z = linalg.fill ins(%cst : f32) outs(%e : tensor<32x16x8xf32>) -> tensor<32x16x8xf32>
  %m = linalg.batch_matmul ins(%a, %b : tensor<32x16x16xf32>, tensor<32x16x8xf32>) outs(%z : tensor<32x16x8xf32>) -> tensor<32x16x8xf32>
  %r = tensor.expand_shape %m [[0, 1], [2], [3]] output_shape [8, 4, 16, 8] : tensor<32x16x8xf32> into tensor<8x4x16x8xf32>
  return %r : tensor<8x4x16x8xf32>
}

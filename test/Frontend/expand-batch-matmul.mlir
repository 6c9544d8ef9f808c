// RUN: par-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(par-expand-batch-matmul))' | FileCheck %s

// Tests that attention's q k^T as torch writes it (the [batch, heads] dims
// collapsed into the bmm's batch, the result expanded back) becomes one
// contraction over (b, h, m, n, r) on the uncollapsed operands, with its
// zero init refilled in the expanded shape, and keeps its par.stage.
// CHECK-DAG:   #[[A:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
// CHECK-DAG:   #[[B:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>
// CHECK-DAG:   #[[C:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
// CHECK-LABEL: func.func @scores
// CHECK-SAME:    (%[[Q:.*]]: tensor<8x4x32x16xf32>, %[[K:.*]]: tensor<8x4x16x32xf32>)
// CHECK:         %[[E:.*]] = tensor.empty() {par.stage = 1 : i64} : tensor<8x4x32x32xf32>
// CHECK:         %[[Z:.*]] = linalg.fill {par.stage = 1 : i64} ins(%{{.*}} : f32) outs(%[[E]] : tensor<8x4x32x32xf32>)
// CHECK:         %[[S:.*]] = linalg.generic {indexing_maps = [#[[A]], #[[B]], #[[C]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
// CHECK-SAME:      ins(%[[Q]], %[[K]] : tensor<8x4x32x16xf32>, tensor<8x4x16x32xf32>) outs(%[[Z]] : tensor<8x4x32x32xf32>)
// CHECK-SAME:      attrs = {par.stage = 1 : i64}
// CHECK:           %[[P:.*]] = arith.mulf
// CHECK:           %[[ACC:.*]] = arith.addf %{{.*}}, %[[P]] : f32
// CHECK:           linalg.yield %[[ACC]]
// CHECK-NOT:     linalg.batch_matmul
// CHECK:         return %[[S]] : tensor<8x4x32x32xf32>
func.func @scores(%q: tensor<8x4x32x16xf32>, %k: tensor<8x4x16x32xf32>) -> tensor<8x4x32x32xf32> {
  %zero = arith.constant 0.0 : f32
  %a = tensor.collapse_shape %q [[0, 1], [2], [3]] : tensor<8x4x32x16xf32> into tensor<32x32x16xf32>
  %b = tensor.collapse_shape %k [[0, 1], [2], [3]] : tensor<8x4x16x32xf32> into tensor<32x16x32xf32>
  %e = tensor.empty() : tensor<32x32x32xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<32x32x32xf32>) -> tensor<32x32x32xf32>
  %c = linalg.batch_matmul {par.stage = 1 : i64} ins(%a, %b : tensor<32x32x16xf32>, tensor<32x16x32xf32>) outs(%z : tensor<32x32x32xf32>) -> tensor<32x32x32xf32>
  %s = tensor.expand_shape %c [[0, 1], [2], [3]] output_shape [8, 4, 32, 32] : tensor<32x32x32xf32> into tensor<8x4x32x32xf32>
  return %s : tensor<8x4x32x32xf32>
}

// -----

// Tests that a user of the collapsed result (here the function's return)
// gets the generic's result collapsed, and that an init other than a fill
// is expanded.
// CHECK-LABEL: func.func @collapsed_use
// CHECK-SAME:    (%[[Q:.*]]: tensor<2x3x4x5xf32>, %[[K:.*]]: tensor<2x3x5x6xf32>, %[[I:.*]]: tensor<6x4x6xf32>)
// CHECK:         %[[X:.*]] = tensor.expand_shape %[[I]] {{\[}}[0, 1], [2], [3]] output_shape [2, 3, 4, 6]
// CHECK:         %[[S:.*]] = linalg.generic {{.*}} ins(%[[Q]], %[[K]] : {{.*}}) outs(%[[X]] : tensor<2x3x4x6xf32>)
// CHECK:         %[[R:.*]] = tensor.collapse_shape %[[S]] {{\[}}[0, 1], [2], [3]] : tensor<2x3x4x6xf32> into tensor<6x4x6xf32>
// CHECK:         return %[[R]]
func.func @collapsed_use(%q: tensor<2x3x4x5xf32>, %k: tensor<2x3x5x6xf32>, %init: tensor<6x4x6xf32>) -> tensor<6x4x6xf32> {
  %a = tensor.collapse_shape %q [[0, 1], [2], [3]] : tensor<2x3x4x5xf32> into tensor<6x4x5xf32>
  %b = tensor.collapse_shape %k [[0, 1], [2], [3]] : tensor<2x3x5x6xf32> into tensor<6x5x6xf32>
  %c = linalg.batch_matmul ins(%a, %b : tensor<6x4x5xf32>, tensor<6x5x6xf32>) outs(%init : tensor<6x4x6xf32>) -> tensor<6x4x6xf32>
  return %c : tensor<6x4x6xf32>
}

// -----

// Tests that a bmm whose operands are not both collapsed over the same
// batch dims (a 3-d bmm as it is, or a 2-d batch on one side only) stays.
// CHECK-LABEL: func.func @not_collapsed
// CHECK:         linalg.batch_matmul
// CHECK:         linalg.batch_matmul
// CHECK-NOT:     linalg.generic
func.func @not_collapsed(%a: tensor<6x4x5xf32>, %q: tensor<2x3x4x5xf32>, %b: tensor<6x5x6xf32>, %init: tensor<6x4x6xf32>) -> (tensor<6x4x6xf32>, tensor<6x4x6xf32>) {
  %c = linalg.batch_matmul ins(%a, %b : tensor<6x4x5xf32>, tensor<6x5x6xf32>) outs(%init : tensor<6x4x6xf32>) -> tensor<6x4x6xf32>
  %qa = tensor.collapse_shape %q [[0, 1], [2], [3]] : tensor<2x3x4x5xf32> into tensor<6x4x5xf32>
  %d = linalg.batch_matmul ins(%qa, %b : tensor<6x4x5xf32>, tensor<6x5x6xf32>) outs(%init : tensor<6x4x6xf32>) -> tensor<6x4x6xf32>
  return %c, %d : tensor<6x4x6xf32>, tensor<6x4x6xf32>
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

// RUN: par-opt %s --par-test-sharding-rules -split-input-file -verify-diagnostics -o /dev/null

// Tests that a matmul's rule comes from its indexing maps: k is a reduction
// combined by sum.
func.func @matmul(%a: tensor<8x4xf32>, %b: tensor<4x16xf32>, %c: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-remark @below {{sharding rule: ([i, k], [k, j], [i, j]) -> ([i, j]) {i=8, j=16, k=4 reduction} combine sum}}
  %0 = linalg.matmul ins(%a, %b : tensor<8x4xf32>, tensor<4x16xf32>) outs(%c : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that batch_matmul shares the batch factor between all operands.
func.func @batch_matmul(%a: tensor<2x8x4xf32>, %b: tensor<2x4x16xf32>, %c: tensor<2x8x16xf32>) -> tensor<2x8x16xf32> {
  // expected-remark @below {{sharding rule: ([i, j, l], [i, l, k], [i, j, k]) -> ([i, j, k]) {i=2, j=8, k=16, l=4 reduction} combine sum}}
  %0 = linalg.batch_matmul ins(%a, %b : tensor<2x8x4xf32>, tensor<2x4x16xf32>) outs(%c : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return %0 : tensor<2x8x16xf32>
}

// -----

// Tests that a generic max-reduction is combined by max, and that a loop read
// through linalg.index is blocked.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @generic(%a: tensor<8x16xf32>, %init: tensor<8xf32>, %out: tensor<8x16xf32>) -> (tensor<8xf32>, tensor<8x16xf32>) {
  // expected-remark @below {{sharding rule: ([i, j], [i]) -> ([i]) {i=8, j=16 reduction} combine max}}
  %0 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%a : tensor<8x16xf32>) outs(%init : tensor<8xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %m = arith.maximumf %acc, %x : f32
    linalg.yield %m : f32
  } -> tensor<8xf32>
  // expected-remark @below {{sharding rule: ([i, j], [i, j]) -> ([i, j]) {i=8 blocked, j=16}}}
  %1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<8x16xf32>) outs(%out : tensor<8x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %i = linalg.index 0 : index
    %ii = arith.index_cast %i : index to i64
    %f = arith.sitofp %ii : i64 to f32
    %s = arith.addf %x, %f : f32
    linalg.yield %s : f32
  } -> tensor<8x16xf32>
  return %0, %1 : tensor<8xf32>, tensor<8x16xf32>
}

// -----

// Tests that a reduction with an unrecognised combiner is blocked rather
// than split.
#id = affine_map<(d0) -> (d0)>
#scalar = affine_map<(d0) -> ()>
func.func @odd_combiner(%a: tensor<8xf32>, %init: tensor<f32>) -> tensor<f32> {
  // expected-remark @below {{sharding rule: ([i], []) -> ([]) {i=8 blocked}}}
  %0 = linalg.generic {indexing_maps = [#id, #scalar], iterator_types = ["reduction"]}
      ins(%a : tensor<8xf32>) outs(%init : tensor<f32>) {
  ^bb0(%x: f32, %acc: f32):
    %m = arith.subf %acc, %x : f32
    linalg.yield %m : f32
  } -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests transpose, broadcast, reduce, map and fill.
func.func @named(%a: tensor<8x16xf32>, %t: tensor<16x8xf32>, %v: tensor<8xf32>, %r: tensor<8xf32>, %c: f32) -> (tensor<16x8xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<8x16xf32>) {
  // expected-remark @below {{sharding rule: ([j, i], [i, j]) -> ([i, j]) {i=16, j=8}}}
  %0 = linalg.transpose ins(%a : tensor<8x16xf32>) outs(%t : tensor<16x8xf32>) permutation = [1, 0]
  // expected-remark @below {{sharding rule: ([i], [i, j]) -> ([i, j]) {i=8, j=16}}}
  %1 = linalg.broadcast ins(%v : tensor<8xf32>) outs(%a : tensor<8x16xf32>) dimensions = [1]
  // expected-remark @below {{sharding rule: ([i, j], [i]) -> ([i]) {i=8, j=16 reduction} combine sum}}
  %2 = linalg.reduce ins(%a : tensor<8x16xf32>) outs(%r : tensor<8xf32>) dimensions = [1]
    (%x: f32, %acc: f32) {
      %s = arith.addf %x, %acc : f32
      linalg.yield %s : f32
    }
  // expected-remark @below {{sharding rule: ([i, j], [i, j]) -> ([i, j]) {i=8, j=16}}}
  %3 = linalg.map { math.exp } ins(%a : tensor<8x16xf32>) outs(%a : tensor<8x16xf32>)
  // expected-remark @below {{sharding rule: (scalar, [i, j]) -> ([i, j]) {i=8, j=16}}}
  %4 = linalg.fill ins(%c : f32) outs(%3 : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %0, %1, %2, %4 : tensor<16x8xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<8x16xf32>
}

// -----

// Tests that softmax blocks its normalised dimension only.
func.func @softmax(%a: tensor<2x8x16xf32>, %o: tensor<2x8x16xf32>) -> tensor<2x8x16xf32> {
  // expected-remark @below {{sharding rule: ([i, j, k], [i, j, k]) -> ([i, j, k]) {i=2, j=8, k=16 blocked}}}
  %0 = linalg.softmax dimension(2) ins(%a : tensor<2x8x16xf32>) outs(%o : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return %0 : tensor<2x8x16xf32>
}

// -----

// Tests elementwise arith and math ops on tensors, splat and non-splat
// constants, and that scalar arith has no rule to report.
func.func @elementwise(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %c: tensor<4x8xi1>) -> tensor<4x8xf32> {
  // expected-remark @below {{sharding rule: () -> ([i, j]) {i=4, j=8}}}
  %s = arith.constant dense<1.0> : tensor<4x8xf32>
  // expected-remark @below {{sharding rule: () -> ([i, j]) {i=4 blocked, j=8 blocked}}}
  %d = arith.constant dense<[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]]> : tensor<4x8xf32>
  // expected-remark @below {{sharding rule: ([i, j], [i, j]) -> ([i, j]) {i=4, j=8}}}
  %0 = arith.mulf %a, %s : tensor<4x8xf32>
  // expected-remark @below {{sharding rule: ([i, j]) -> ([i, j]) {i=4, j=8}}}
  %1 = math.erf %0 : tensor<4x8xf32>
  // expected-remark @below {{sharding rule: ([i, j], [i, j], [i, j]) -> ([i, j]) {i=4, j=8}}}
  %2 = arith.select %c, %1, %d : tensor<4x8xi1>, tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}

// -----

// Tests tensor ops: empty, splat, reshapes (the major dim of a group carries
// the split, minor dims are blocked, unit dims have no factor), slices
// touching a dim block it, concat blocks its dim.
func.func @tensor_ops(%a: tensor<8x16xf32>, %f: f32, %big: tensor<8x32xf32>) -> (tensor<8x32xf32>, tensor<8x2x8xf32>) {
  // expected-remark @below {{sharding rule: () -> ([i, j]) {i=8, j=16}}}
  %e = tensor.empty() : tensor<8x16xf32>
  // expected-remark @below {{sharding rule: (scalar) -> ([i, j]) {i=8, j=16}}}
  %s = tensor.splat %f : tensor<8x16xf32>
  // expected-remark @below {{sharding rule: ([i, j]) -> ([i, j, k]) {i=8, j=2, k=8 blocked}}}
  %x = tensor.expand_shape %a [[0], [1, 2]] output_shape [8, 2, 8] : tensor<8x16xf32> into tensor<8x2x8xf32>
  // expected-remark @below {{sharding rule: ([i, j, k]) -> ([i, j]) {i=8, j=2, k=8 blocked}}}
  %y = tensor.collapse_shape %x [[0], [1, 2]] : tensor<8x2x8xf32> into tensor<8x16xf32>
  // expected-remark @below {{sharding rule: ([i, j]) -> ([i]) {i=8, j=16 blocked}}}
  %u = tensor.collapse_shape %a [[0, 1]] : tensor<8x16xf32> into tensor<128xf32>
  // expected-remark @below {{sharding rule: () -> ([i, j]) {i=1, j=16}}}
  %a1 = tensor.empty() : tensor<1x16xf32>
  // expected-remark @below {{sharding rule: ([_, i]) -> ([i]) {i=16}}}
  %u1 = tensor.collapse_shape %a1 [[0, 1]] : tensor<1x16xf32> into tensor<16xf32>
  // expected-remark @below {{sharding rule: ([i, j]) -> ([i, k]) {i=8, j=32 blocked, k=16 blocked}}}
  %sl = tensor.extract_slice %big[0, 0] [8, 16] [1, 1] : tensor<8x32xf32> to tensor<8x16xf32>
  // expected-remark @below {{sharding rule: ([i, k], [i, j]) -> ([i, j]) {i=8, j=32 blocked, k=16 blocked}}}
  %in = tensor.insert_slice %y into %big[0, 16] [8, 16] [1, 1] : tensor<8x16xf32> into tensor<8x32xf32>
  // expected-remark @below {{sharding rule: ([i, j], [i, k]) -> ([i, l]) {i=8, j=16 blocked, k=16 blocked, l=32 blocked}}}
  %c = tensor.concat dim(1) %sl, %s : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x32xf32>
  return %c, %x : tensor<8x32xf32>, tensor<8x2x8xf32>
}

// -----

// Tests that an op with no model, and a convolution (not a projected
// permutation), report no rule.
func.func @no_rule(%a: tensor<1x8x8x1xf32>, %k: tensor<3x3x1x1xf32>, %o: tensor<1x6x6x1xf32>) -> tensor<1x6x6x1xf32> {
  // expected-remark @below {{no sharding rule}}
  %0 = linalg.conv_2d_nhwc_hwcf ins(%a, %k : tensor<1x8x8x1xf32>, tensor<3x3x1x1xf32>) outs(%o : tensor<1x6x6x1xf32>) -> tensor<1x6x6x1xf32>
  %c0 = arith.constant 0.0 : f32
  // expected-remark @below {{no sharding rule}}
  %1 = tensor.pad %0 low[0, 0, 0, 0] high[0, 0, 0, 0] {
  ^bb0(%i: index, %j: index, %l: index, %m: index):
    tensor.yield %c0 : f32
  } : tensor<1x6x6x1xf32> to tensor<1x6x6x1xf32>
  return %1 : tensor<1x6x6x1xf32>
}

// -----

// Tests that par.recompute_barrier's rule is the identity: operand and
// result share every factor, so a recomputation partitions like the
// forward it repeats.
func.func @recompute_barrier(%x: tensor<2x8x16xf32>) -> tensor<2x8x16xf32> {
  // expected-remark @below {{sharding rule: ([i, j, k]) -> ([i, j, k]) {i=2, j=8, k=16}}}
  %0 = par.recompute_barrier %x : tensor<2x8x16xf32>
  return %0 : tensor<2x8x16xf32>
}

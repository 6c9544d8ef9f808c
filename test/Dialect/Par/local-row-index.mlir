// RUN: par-opt %s --par-local-row-index -split-input-file | FileCheck %s

// Tests that a split table's lookup, which compares this device's block of
// the row iota (par.all_slice of an iota) with the token, compares the row
// loop's index with the token less the block's first row instead (read
// once, before the generic), and no longer reads the iota: the one-hot
// form par-one-hot-to-scatter gathers.
// CHECK-LABEL: func.func @lookup(
// CHECK-SAME:    %[[TOK:.*]]: tensor<2x3xi64>, %[[T:.*]]: tensor<4x8xf32>
// CHECK:         %[[SHARD:.*]] = par.all_slice
// CHECK:         %[[OFF:.*]] = tensor.extract %[[SHARD]][%{{.*}}] : tensor<4xi64>
// CHECK:         linalg.generic
// CHECK-SAME:      ins(%[[TOK]], %[[T]] : tensor<2x3xi64>, tensor<4x8xf32>)
// CHECK:           %[[LOCAL:.*]] = arith.subi %{{.*}}, %[[OFF]] : i64
// CHECK:           %[[ROW:.*]] = arith.index_cast %[[LOCAL]] : i64 to index
// CHECK:           %[[R:.*]] = linalg.index 3 : index
// CHECK:           arith.cmpi eq, %[[R]], %[[ROW]] : index
par.mesh @mesh ["tp"=2]
#iota = affine_map<(r) -> (r)>
#tok = affine_map<(b, s, d, r) -> (b, s)>
#tab = affine_map<(b, s, d, r) -> (r, d)>
#row = affine_map<(b, s, d, r) -> (r)>
#out = affine_map<(b, s, d, r) -> (b, s, d)>
func.func @lookup(%tok: tensor<2x3xi64>, %t: tensor<4x8xf32>) -> tensor<2x3x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8xi64>
  %iota = linalg.generic {indexing_maps = [#iota], iterator_types = ["parallel"]} outs(%e : tensor<8xi64>) {
  ^bb0(%o: i64):
    %i = linalg.index 0 : index
    %c = arith.index_cast %i : index to i64
    linalg.yield %c : i64
  } -> tensor<8xi64>
  %shard = par.all_slice %iota on @mesh axes = ["tp"] dim = 0 : tensor<8xi64> -> tensor<4xi64>
  %e2 = tensor.empty() : tensor<2x3x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %r = linalg.generic {indexing_maps = [#tok, #tab, #row, #out], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%tok, %t, %shard : tensor<2x3xi64>, tensor<4x8xf32>, tensor<4xi64>) outs(%z : tensor<2x3x8xf32>) {
  ^bb0(%x: i64, %w: f32, %n: i64, %acc: f32):
    %hit = arith.cmpi eq, %n, %x : i64
    %sel = arith.select %hit, %w, %zero : f32
    %sum = arith.addf %acc, %sel : f32
    linalg.yield %sum : f32
  } -> tensor<2x3x8xf32>
  return %r : tensor<2x3x8xf32>
}

// -----

// Tests what stays: a block of something other than an iota (its values
// need not be consecutive), and a comparison whose other side reads the
// row loop.
// CHECK-LABEL: func.func @not_an_iota(
// CHECK-NOT:     linalg.index 1
// CHECK:         arith.cmpi eq, %{{.*}}, %{{.*}} : i64
// CHECK-LABEL: func.func @row_dependent(
// CHECK-NOT:     tensor.extract
// CHECK:         arith.cmpi eq, %{{.*}}, %{{.*}} : i64
par.mesh @mesh ["tp"=2]
#id = affine_map<(b, r) -> (b)>
#row = affine_map<(b, r) -> (r)>
#out = affine_map<(b, r) -> (b)>
func.func @not_an_iota(%tok: tensor<3xi64>, %ids: tensor<8xi64>, %w: tensor<4xf32>) -> tensor<3xf32> {
  %zero = arith.constant 0.0 : f32
  %shard = par.all_slice %ids on @mesh axes = ["tp"] dim = 0 : tensor<8xi64> -> tensor<4xi64>
  %e = tensor.empty() : tensor<3xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<3xf32>) -> tensor<3xf32>
  %r = linalg.generic {indexing_maps = [#id, #row, #row, #out], iterator_types = ["parallel", "reduction"]}
      ins(%tok, %shard, %w : tensor<3xi64>, tensor<4xi64>, tensor<4xf32>) outs(%z : tensor<3xf32>) {
  ^bb0(%x: i64, %n: i64, %v: f32, %acc: f32):
    %hit = arith.cmpi eq, %n, %x : i64
    %sel = arith.select %hit, %v, %zero : f32
    %sum = arith.addf %acc, %sel : f32
    linalg.yield %sum : f32
  } -> tensor<3xf32>
  return %r : tensor<3xf32>
}
#iota = affine_map<(r) -> (r)>
func.func @row_dependent(%w: tensor<4xi64>) -> tensor<3xi64> {
  %e = tensor.empty() : tensor<8xi64>
  %iota = linalg.generic {indexing_maps = [#iota], iterator_types = ["parallel"]} outs(%e : tensor<8xi64>) {
  ^bb0(%o: i64):
    %i = linalg.index 0 : index
    %c = arith.index_cast %i : index to i64
    linalg.yield %c : i64
  } -> tensor<8xi64>
  %shard = par.all_slice %iota on @mesh axes = ["tp"] dim = 0 : tensor<8xi64> -> tensor<4xi64>
  %e3 = tensor.empty() : tensor<3xi64>
  %c0 = arith.constant 0 : i64
  %z = linalg.fill ins(%c0 : i64) outs(%e3 : tensor<3xi64>) -> tensor<3xi64>
  %r = linalg.generic {indexing_maps = [#row, #row, #out], iterator_types = ["parallel", "reduction"]}
      ins(%shard, %w : tensor<4xi64>, tensor<4xi64>) outs(%z : tensor<3xi64>) {
  ^bb0(%n: i64, %v: i64, %acc: i64):
    %hit = arith.cmpi eq, %n, %v : i64
    %one = arith.extui %hit : i1 to i64
    %sum = arith.addi %acc, %one : i64
    linalg.yield %sum : i64
  } -> tensor<3xi64>
  return %r : tensor<3xi64>
}

// RUN: par-opt %s --par-spmd -split-input-file | FileCheck %s

// Tests a gather (a generic reading a table it captures, at a
// data-dependent row) whose table is sharded: the body reads global rows, so
// the table is gathered whole before the generic, which reads the gathered
// copy; the generic itself runs on the local batch (tokens split on dp), and
// its loop read through linalg.index (d) is never split.
// CHECK-LABEL: func.func @sharded_table
// CHECK-SAME:    (%[[TOK:.*]]: tensor<2x3xi64> {{.*}}, %[[W:.*]]: tensor<4x4xf32>
// CHECK:         %[[FULL:.*]] = par.all_gather %[[W]] on @mesh axes = ["tp"] dim = 0 : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK:         linalg.generic {{.*}} ins(%[[TOK]] : tensor<2x3xi64>) outs(%{{.*}} : tensor<2x3x4xf32>)
// CHECK:           tensor.extract %[[FULL]][%{{.*}}, %{{.*}}] : tensor<8x4xf32>
// CHECK:         } -> tensor<2x3x4xf32>
par.mesh @mesh ["dp"=2, "tp"=2]
#tok = affine_map<(b, s, d) -> (b, s)>
#act = affine_map<(b, s, d) -> (b, s, d)>
func.func @sharded_table(
    %tokens: tensor<4x3xi64> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
    %wte: tensor<8x4xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>})
    -> tensor<4x3x4xf32> {
  %e = tensor.empty() : tensor<4x3x4xf32>
  %h = linalg.generic {indexing_maps = [#tok, #act], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%tokens : tensor<4x3xi64>) outs(%e : tensor<4x3x4xf32>) {
  ^bb0(%t: i64, %o: f32):
    %i = arith.index_cast %t : i64 to index
    %j = linalg.index 2 : index
    %w = tensor.extract %wte[%i, %j] : tensor<8x4xf32>
    linalg.yield %w : f32
  } -> tensor<4x3x4xf32>
  return %h : tensor<4x3x4xf32>
}

// -----

// Tests that a replicated table is read in place: no collective, and the
// gather's output stays split on dp like the tokens.
// CHECK-LABEL: func.func @replicated_table
// CHECK-SAME:    (%[[TOK:.*]]: tensor<2x3xi64> {{.*}}, %[[W:.*]]: tensor<8x4xf32>
// CHECK-SAME:    -> (tensor<2x3x4xf32> {par.global_type = tensor<4x3x4xf32>, par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>})
// CHECK-NOT:     par.all_gather
// CHECK:         tensor.extract %[[W]][%{{.*}}, %{{.*}}] : tensor<8x4xf32>
par.mesh @mesh ["dp"=2, "tp"=2]
#tok = affine_map<(b, s, d) -> (b, s)>
#act = affine_map<(b, s, d) -> (b, s, d)>
func.func @replicated_table(
    %tokens: tensor<4x3xi64> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
    %wte: tensor<8x4xf32>) -> tensor<4x3x4xf32> {
  %e = tensor.empty() : tensor<4x3x4xf32>
  %h = linalg.generic {indexing_maps = [#tok, #act], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%tokens : tensor<4x3xi64>) outs(%e : tensor<4x3x4xf32>) {
  ^bb0(%t: i64, %o: f32):
    %i = arith.index_cast %t : i64 to index
    %j = linalg.index 2 : index
    %w = tensor.extract %wte[%i, %j] : tensor<8x4xf32>
    linalg.yield %w : f32
  } -> tensor<4x3x4xf32>
  return %h : tensor<4x3x4xf32>
}

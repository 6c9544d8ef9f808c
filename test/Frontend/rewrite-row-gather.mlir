// RUN: par-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(par-rewrite-row-gather))' | FileCheck %s

// Tests that cross-entropy's pick of each row's target log-probability
// (tensor.extract %logp[linalg.index 0, index_cast(target)] in a generic
// over the rows) becomes a reduction over the vocabulary of
// select(iota == target, logp, 0): logp and an iota are inputs, the row's
// linalg.index is gone (the rows stay splittable), the range checks stay,
// and par.stage is kept on the new ops.
// CHECK-DAG:   #[[ROW:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-DAG:   #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG:   #[[COL:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @pick
// CHECK-SAME:    (%{{.*}}: tensor<8x6xf32>, %[[T:.*]]: tensor<8xi64>)
// CHECK:         %[[LOGP:.*]] = linalg.generic
// CHECK:         %[[IOTA:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<6xi64>) attrs = {par.stage = 3 : i64}
// CHECK:           linalg.index 0
// CHECK:         %[[Z:.*]] = linalg.fill {par.stage = 3 : i64} {{.*}} -> tensor<8xf32>
// CHECK:         %[[SUM:.*]] = linalg.generic {indexing_maps = [#[[ROW]], #[[ID]], #[[COL]], #[[ROW]]], iterator_types = ["parallel", "reduction"]}
// CHECK-SAME:      ins(%[[T]], %[[LOGP]], %[[IOTA]] : tensor<8xi64>, tensor<8x6xf32>, tensor<6xi64>)
// CHECK-SAME:      outs(%[[Z]] : tensor<8xf32>) attrs = {par.stage = 3 : i64}
// CHECK-NEXT:    ^bb0(%[[TI:.*]]: i64, %[[L:.*]]: f32, %[[V:.*]]: i64, %[[ACC:.*]]: f32):
// CHECK-NOT:       linalg.index
// CHECK:           cf.assert
// CHECK:           %[[HIT:.*]] = arith.cmpi eq, %[[V]], %{{.*}} : i64
// CHECK:           %[[P:.*]] = arith.select %[[HIT]], %[[L]], %{{.*}} : f32
// CHECK:           %[[S:.*]] = arith.addf %[[ACC]], %[[P]] : f32
// CHECK:           linalg.yield %[[S]] : f32
// CHECK-NOT:     tensor.extract
// CHECK:         return %[[SUM]]
func.func @pick(%x: tensor<8x6xf32>, %t: tensor<8xi64>) -> tensor<8xf32> {
  %c6 = arith.constant 6 : index
  %e6 = tensor.empty() : tensor<8x6xf32>
  %logp = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<8x6xf32>) outs(%e6 : tensor<8x6xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<8x6xf32>
  %e = tensor.empty() : tensor<8xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%t : tensor<8xi64>) outs(%e : tensor<8xf32>) attrs = {par.stage = 3 : i64} {
  ^bb0(%in: i64, %out: f32):
    %i = linalg.index 0 : index
    %j = arith.index_cast %in : i64 to index
    %ok = arith.cmpi slt, %j, %c6 : index
    cf.assert %ok, "index must be smaller than dim size"
    %v = tensor.extract %logp[%i, %j] : tensor<8x6xf32>
    linalg.yield %v : f32
  } -> tensor<8xf32>
  return %g : tensor<8xf32>
}

// -----

// Tests that an embedding lookup (the table a function argument) keeps its
// gather: its adjoint is par-autodiff's scatter-add, and a reduction over
// the vocabulary per element would cost V times more.
// CHECK-LABEL: func.func @embedding
// CHECK:         tensor.extract %{{.*}}[%{{.*}}, %{{.*}}] : tensor<10x4xf32>
func.func @embedding(%wte: tensor<10x4xf32>, %tok: tensor<8xi64>) -> tensor<8x4xf32> {
  %e = tensor.empty() : tensor<8x4xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%tok : tensor<8xi64>) outs(%e : tensor<8x4xf32>) {
  ^bb0(%in: i64, %out: f32):
    %r = arith.index_cast %in : i64 to index
    %c = linalg.index 1 : index
    %v = tensor.extract %wte[%r, %c] : tensor<10x4xf32>
    linalg.yield %v : f32
  } -> tensor<8x4xf32>
  return %g : tensor<8x4xf32>
}

// -----

// Tests that a vocabulary-parallel embedding table (a function argument
// whose par.sharding splits the gathered dimension, par-import's plan for
// the token embedding under tp) becomes the compare-select-sum: the table
// is an input and its rows a reduction loop, so each rank sums its own rows
// (Megatron's masked lookup) and the split sum is one all-reduce of the
// looked-up rows, instead of an all-gather of the table.
// CHECK-LABEL: func.func @vocab_parallel_embedding
// CHECK-SAME:    (%[[W:.*]]: tensor<10x4xf32> {par.sharding = {{.*}}}, %[[TOK:.*]]: tensor<8xi64>)
// CHECK:         %[[IOTA:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<10xi64>)
// CHECK:         linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]
// CHECK-SAME:      ins(%[[TOK]], %[[W]], %[[IOTA]] : tensor<8xi64>, tensor<10x4xf32>, tensor<10xi64>)
// CHECK-NOT:       linalg.index
// CHECK:           arith.cmpi eq
// CHECK:           arith.select
// CHECK:           arith.addf
// CHECK-NOT:     tensor.extract
par.mesh @mesh ["tp"=2]
func.func @vocab_parallel_embedding(%wte: tensor<10x4xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}, %tok: tensor<8xi64>) -> tensor<8x4xf32> {
  %e = tensor.empty() : tensor<8x4xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%tok : tensor<8xi64>) outs(%e : tensor<8x4xf32>) {
  ^bb0(%in: i64, %out: f32):
    %r = arith.index_cast %in : i64 to index
    %c = linalg.index 1 : index
    %v = tensor.extract %wte[%r, %c] : tensor<10x4xf32>
    linalg.yield %v : f32
  } -> tensor<8x4xf32>
  return %g : tensor<8x4xf32>
}

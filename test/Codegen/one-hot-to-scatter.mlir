// RUN: par-opt %s --par-one-hot-to-scatter -split-input-file | FileCheck %s

// Tests that an embedding's gradient (par-autodiff's one-hot accumulation
// over the table's rows, loop d2 here) becomes a scatter-add: the loops
// other than the row loop in their order, the token computed once per
// (b, s, d), and one guarded read-add-write of the selected row.
// CHECK-LABEL: func.func @embedding_grad(
// CHECK-SAME:    %[[TOK:.*]]: memref<2x3xi64>, %[[DY:.*]]: memref<2x3x4xf32>, %[[DW:.*]]: memref<5x4xf32>)
// CHECK-NOT:     linalg.generic
// CHECK:         scf.for %[[B:.*]] = %{{.*}} to %{{.*}} step
// CHECK:           scf.for %[[S:.*]] = %{{.*}} to %{{.*}} step
// CHECK:             scf.for %[[D:.*]] = %{{.*}} to %{{.*}} step
// CHECK:               %[[T:.*]] = memref.load %[[TOK]][%[[B]], %[[S]]]
// CHECK:               %[[G:.*]] = memref.load %[[DY]][%[[B]], %[[S]], %[[D]]]
// CHECK:               %[[ROW:.*]] = arith.index_cast %[[T]] : i64 to index
// CHECK:               %[[LT:.*]] = arith.cmpi slt, %[[ROW]], %{{.*}} : index
// CHECK:               %[[GE:.*]] = arith.cmpi sge, %[[ROW]], %{{.*}} : index
// CHECK:               %[[IN:.*]] = arith.andi %[[GE]], %[[LT]] : i1
// CHECK:               scf.if %[[IN]] {
// CHECK:                 %[[OLD:.*]] = memref.load %[[DW]][%[[ROW]], %[[D]]]
// CHECK:                 %[[NEW:.*]] = arith.addf %[[OLD]], %[[G]] : f32
// CHECK:                 memref.store %[[NEW]], %[[DW]][%[[ROW]], %[[D]]]
#tok = affine_map<(b, s, d, r) -> (b, s)>
#dy = affine_map<(b, s, d, r) -> (b, s, d)>
#tab = affine_map<(b, s, d, r) -> (r, d)>
func.func @embedding_grad(%tok: memref<2x3xi64>, %dy: memref<2x3x4xf32>, %dw: memref<5x4xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#tok, #dy, #tab], iterator_types = ["reduction", "reduction", "parallel", "parallel"]}
      ins(%tok, %dy : memref<2x3xi64>, memref<2x3x4xf32>) outs(%dw : memref<5x4xf32>) {
  ^bb0(%t: i64, %g: f32, %acc: f32):
    %row = arith.index_cast %t : i64 to index
    %r = linalg.index 3 : index
    %hit = arith.cmpi eq, %r, %row : index
    %sel = arith.select %hit, %g, %zero : f32
    %sum = arith.addf %acc, %sel : f32
    linalg.yield %sum : f32
  }
  return
}

// -----

// Tests what stays a one-hot loop: an input indexed by the row loop (the
// row's value is read at every row), and a select whose other value is
// not zero (every row receives something).
// CHECK-LABEL: func.func @not_a_scatter(
// CHECK:         linalg.generic
// CHECK:         linalg.generic
// CHECK-NOT:     scf.if
#tok = affine_map<(b, r) -> (b)>
#row = affine_map<(b, r) -> (r)>
#out = affine_map<(b, r) -> (r)>
func.func @not_a_scatter(%tok: memref<3xi64>, %w: memref<5xf32>, %out: memref<5xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  linalg.generic {indexing_maps = [#tok, #row, #out], iterator_types = ["reduction", "parallel"]}
      ins(%tok, %w : memref<3xi64>, memref<5xf32>) outs(%out : memref<5xf32>) {
  ^bb0(%t: i64, %x: f32, %acc: f32):
    %row = arith.index_cast %t : i64 to index
    %r = linalg.index 1 : index
    %hit = arith.cmpi eq, %r, %row : index
    %sel = arith.select %hit, %x, %zero : f32
    %sum = arith.addf %acc, %sel : f32
    linalg.yield %sum : f32
  }
  linalg.generic {indexing_maps = [#tok, #out], iterator_types = ["reduction", "parallel"]}
      ins(%tok : memref<3xi64>) outs(%out : memref<5xf32>) {
  ^bb0(%t: i64, %acc: f32):
    %row = arith.index_cast %t : i64 to index
    %r = linalg.index 1 : index
    %hit = arith.cmpi eq, %r, %row : index
    %sel = arith.select %hit, %one, %one : f32
    %sum = arith.addf %acc, %sel : f32
    linalg.yield %sum : f32
  }
  return
}

// -----

// Tests the lookup of a split table (par-local-row-index's form): the row
// loop is the reduction, the table is read at the matching row only: one
// guarded read of T[x, d] added to the output, the row loop gone.
// CHECK-LABEL: func.func @split_lookup(
// CHECK-SAME:    %[[TOK:.*]]: memref<2x3xi64>, %[[T:.*]]: memref<5x4xf32>, %[[OUT:.*]]: memref<2x3x4xf32>,
// CHECK-NOT:     linalg.generic
// CHECK:         scf.for %[[B:.*]] = %{{.*}} to %{{.*}} step
// CHECK:           scf.for %[[S:.*]] = %{{.*}} to %{{.*}} step
// CHECK:             scf.for %[[D:.*]] = %{{.*}} to %{{.*}} step
// CHECK-NOT:           scf.for
// CHECK:               %[[TK:.*]] = memref.load %[[TOK]][%[[B]], %[[S]]]
// CHECK:               %[[LOCAL:.*]] = arith.subi %[[TK]], %{{.*}} : i64
// CHECK:               %[[ROW:.*]] = arith.index_cast %[[LOCAL]] : i64 to index
// CHECK:               scf.if
// CHECK:                 %[[V:.*]] = memref.load %[[T]][%[[ROW]], %[[D]]]
// CHECK:                 %[[OLD:.*]] = memref.load %[[OUT]][%[[B]], %[[S]], %[[D]]]
// CHECK:                 %[[NEW:.*]] = arith.addf %[[OLD]], %[[V]] : f32
// CHECK:                 memref.store %[[NEW]], %[[OUT]][%[[B]], %[[S]], %[[D]]]
#tok = affine_map<(b, s, d, r) -> (b, s)>
#tab = affine_map<(b, s, d, r) -> (r, d)>
#out = affine_map<(b, s, d, r) -> (b, s, d)>
func.func @split_lookup(%tok: memref<2x3xi64>, %t: memref<5x4xf32>, %out: memref<2x3x4xf32>, %off: i64) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#tok, #tab, #out], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%tok, %t : memref<2x3xi64>, memref<5x4xf32>) outs(%out : memref<2x3x4xf32>) {
  ^bb0(%x: i64, %w: f32, %acc: f32):
    %local = arith.subi %x, %off : i64
    %row = arith.index_cast %local : i64 to index
    %r = linalg.index 3 : index
    %hit = arith.cmpi eq, %r, %row : index
    %sel = arith.select %hit, %w, %zero : f32
    %sum = arith.addf %acc, %sel : f32
    linalg.yield %sum : f32
  }
  return
}

// -----

// Tests the gradient of a split table's lookup (its adjoint multiplies dy
// by select(hit, 1, 0)): a scatter-add of dy itself (dy x 1 = dy).
// CHECK-LABEL: func.func @split_lookup_grad(
// CHECK-SAME:    %[[TOK:.*]]: memref<2x3xi64>, %[[DY:.*]]: memref<2x3x4xf32>, %[[DW:.*]]: memref<5x4xf32>
// CHECK-NOT:     linalg.generic
// CHECK-NOT:     arith.mulf
// CHECK:         scf.if
// CHECK:           %[[OLD:.*]] = memref.load %[[DW]]
// CHECK:           %[[NEW:.*]] = arith.addf %[[OLD]], %{{.*}} : f32
// CHECK:           memref.store %[[NEW]], %[[DW]]
#tok = affine_map<(b, s, d, r) -> (b, s)>
#dy = affine_map<(b, s, d, r) -> (b, s, d)>
#tab = affine_map<(b, s, d, r) -> (r, d)>
func.func @split_lookup_grad(%tok: memref<2x3xi64>, %dy: memref<2x3x4xf32>, %dw: memref<5x4xf32>, %off: i64) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  linalg.generic {indexing_maps = [#tok, #dy, #tab], iterator_types = ["reduction", "reduction", "parallel", "parallel"]}
      ins(%tok, %dy : memref<2x3xi64>, memref<2x3x4xf32>) outs(%dw : memref<5x4xf32>) {
  ^bb0(%x: i64, %g: f32, %acc: f32):
    %local = arith.subi %x, %off : i64
    %row = arith.index_cast %local : i64 to index
    %r = linalg.index 3 : index
    %hit = arith.cmpi eq, %r, %row : index
    %sel = arith.select %hit, %one, %zero : f32
    %prod = arith.mulf %g, %sel : f32
    %sum = arith.addf %acc, %prod : f32
    linalg.yield %sum : f32
  }
  return
}

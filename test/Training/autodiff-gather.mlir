// RUN: par-opt %s --par-autodiff -split-input-file -verify-diagnostics | FileCheck %s

// Tests that a gather (a generic reading a table it captures, at a
// data-dependent row) makes the table active, and that the table's adjoint
// is a scatter-add: a generic over the gather's loops plus one loop over the
// table's rows, reducing over the batch loops, that adds dy where the row
// loop equals the recomputed token.
// CHECK-DAG: #[[TOK:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1)>
// CHECK-DAG: #[[DY:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-DAG: #[[TAB:.*]] = affine_map<(d0, d1, d2, d3) -> (d3, d2)>
// CHECK-LABEL: func.func @gather_grad(
// CHECK-SAME:    -> (tensor<f32>, tensor<5x4xf32>)
// CHECK:         %[[Z:.*]] = linalg.fill {{.*}} -> tensor<5x4xf32>
// CHECK:         %[[DW:.*]] = linalg.generic {indexing_maps = [#[[TOK]], #[[DY]], #[[TAB]]], iterator_types = ["reduction", "reduction", "parallel", "parallel"]}
// CHECK-SAME:        outs(%[[Z]] : tensor<5x4xf32>)
// CHECK:         ^bb0(%[[T:.*]]: i64, %[[G:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK:           %[[ROW:.*]] = arith.index_cast %[[T]] : i64 to index
// CHECK:           %[[V:.*]] = linalg.index 3 : index
// CHECK:           %[[HIT:.*]] = arith.cmpi eq, %[[V]], %[[ROW]] : index
// CHECK:           %[[SEL:.*]] = arith.select %[[HIT]], %[[G]], %{{.*}} : f32
// CHECK:           %[[SUM:.*]] = arith.addf %[[ACC]], %[[SEL]] : f32
// CHECK:           linalg.yield %[[SUM]] : f32
// CHECK:         return %{{.*}}, %[[DW]] : tensor<f32>, tensor<5x4xf32>
#tok = affine_map<(b, s, d) -> (b, s)>
#act = affine_map<(b, s, d) -> (b, s, d)>
#red = affine_map<(b, s, d) -> ()>
func.func @gather(%tokens: tensor<2x3xi64>, %wte: tensor<5x4xf32> {par.param}) -> tensor<f32> {
  %e = tensor.empty() : tensor<2x3x4xf32>
  %h = linalg.generic {indexing_maps = [#tok, #act], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%tokens : tensor<2x3xi64>) outs(%e : tensor<2x3x4xf32>) {
  ^bb0(%t: i64, %o: f32):
    %i = arith.index_cast %t : i64 to index
    %j = linalg.index 2 : index
    %w = tensor.extract %wte[%i, %j] : tensor<5x4xf32>
    linalg.yield %w : f32
  } -> tensor<2x3x4xf32>
  %c0 = arith.constant 0.0 : f32
  %el = tensor.empty() : tensor<f32>
  %zl = linalg.fill ins(%c0 : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [#act, #red], iterator_types = ["reduction", "reduction", "reduction"]}
      ins(%h : tensor<2x3x4xf32>) outs(%zl : tensor<f32>) {
  ^bb0(%v: f32, %acc: f32):
    %sq = arith.mulf %v, %v : f32
    %r = arith.addf %acc, %sq : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests a table read at loop indices: read transposed (w[j, i]) its adjoint
// is a generic over the same loops with the transposed map, no new loop and
// no comparison; read at w[i, i], where loop i spans dim 1 but not dim 0
// (3 rows, 2 iterations), dim 0 gets a new loop compared with i and loop j
// becomes a reduction. The two reads' adjoints add; the operand x keeps its
// own adjoint.
// CHECK-DAG: #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[TR:.*]] = affine_map<(d0, d1) -> (d1, d0)>
// CHECK-DAG: #[[ID3:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG: #[[DIAG:.*]] = affine_map<(d0, d1, d2) -> (d2, d0)>
// CHECK-LABEL: func.func @loops_grad(
// CHECK:         %[[DX:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[ID]]], iterator_types = ["parallel", "parallel"]}  ins(%{{[0-9]+}} :
// CHECK:         %[[DW1:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[ID]], #[[TR]]], iterator_types = ["parallel", "parallel"]}
// CHECK-NOT:       arith.cmpi
// CHECK:         } -> tensor<3x2xf32>
// CHECK:         %[[DW2:.*]] = linalg.generic {indexing_maps = [#[[ID3]], #[[DIAG]]], iterator_types = ["parallel", "reduction", "parallel"]}
// CHECK:           %[[I:.*]] = linalg.index 0 : index
// CHECK:           %[[K:.*]] = linalg.index 2 : index
// CHECK:           arith.cmpi eq, %[[K]], %[[I]] : index
// CHECK:         } -> tensor<3x2xf32>
// CHECK:         %[[DW:.*]] = arith.addf %[[DW1]], %[[DW2]] : tensor<3x2xf32>
// CHECK:         return %{{.*}}, %[[DX]], %[[DW]] :
#id = affine_map<(i, j) -> (i, j)>
#red2 = affine_map<(i, j) -> ()>
func.func @loops(%x: tensor<2x3xf32> {par.param}, %w: tensor<3x2xf32> {par.param}) -> tensor<f32> {
  %e = tensor.empty() : tensor<2x3xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x3xf32>) outs(%e : tensor<2x3xf32>) {
  ^bb0(%a: f32, %o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %wt = tensor.extract %w[%j, %i] : tensor<3x2xf32>
    %wd = tensor.extract %w[%i, %i] : tensor<3x2xf32>
    %p = arith.mulf %a, %wt : f32
    %s = arith.addf %p, %wd : f32
    linalg.yield %s : f32
  } -> tensor<2x3xf32>
  %c0 = arith.constant 0.0 : f32
  %el = tensor.empty() : tensor<f32>
  %zl = linalg.fill ins(%c0 : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [#id, #red2], iterator_types = ["reduction", "reduction"]}
      ins(%y : tensor<2x3xf32>) outs(%zl : tensor<f32>) {
  ^bb0(%v: f32, %acc: f32):
    %r = arith.addf %acc, %v : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a table read from above that does not depend on a parameter
// gets no adjoint: only the operand's gradient is built.
// CHECK-LABEL: func.func @frozen_grad(
// CHECK-SAME:    -> (tensor<f32>, tensor<2xf32>)
// CHECK-COUNT-2: linalg.generic
// CHECK-NOT:     linalg.generic
// CHECK:         return
#v = affine_map<(i) -> (i)>
#r1 = affine_map<(i) -> ()>
func.func @frozen(%x: tensor<2xf32> {par.param}, %tab: tensor<2xf32>) -> tensor<f32> {
  %c0 = arith.constant 0.0 : f32
  %el = tensor.empty() : tensor<f32>
  %zl = linalg.fill ins(%c0 : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [#v, #r1], iterator_types = ["reduction"]}
      ins(%x : tensor<2xf32>) outs(%zl : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %i = linalg.index 0 : index
    %t = tensor.extract %tab[%i] : tensor<2xf32>
    %p = arith.mulf %a, %t : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a parameter read from above other than by tensor.extract in
// the body is rejected, naming the reading op.
#v = affine_map<(i) -> (i)>
func.func @slice_read(%x: tensor<2xf32>, %w: tensor<4xf32> {par.param}) -> tensor<f32> {
  %e = tensor.empty() : tensor<2xf32>
  // expected-error @+1 {{reads a tensor defined outside its body through 'tensor.extract_slice'; par-autodiff differentiates only tensor.extract directly in the body}}
  %y = linalg.generic {indexing_maps = [#v, #v], iterator_types = ["parallel"]}
      ins(%x : tensor<2xf32>) outs(%e : tensor<2xf32>) {
  ^bb0(%a: f32, %o: f32):
    %i = linalg.index 0 : index
    %s = tensor.extract_slice %w[0] [2] [1] : tensor<4xf32> to tensor<2xf32>
    %t = tensor.extract %s[%i] : tensor<2xf32>
    %p = arith.mulf %a, %t : f32
    linalg.yield %p : f32
  } -> tensor<2xf32>
  %s0 = tensor.extract_slice %y[0] [1] [1] : tensor<2xf32> to tensor<1xf32>
  %l = tensor.collapse_shape %s0 [] : tensor<1xf32> into tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a scalar read from above that depends on a parameter is
// rejected, naming the generic.
#v = affine_map<(i) -> (i)>
#r1 = affine_map<(i) -> ()>
func.func @scalar_read(%x: tensor<2xf32>, %w: tensor<f32> {par.param}) -> tensor<f32> {
  %s = tensor.extract %w[] : tensor<f32>
  %c0 = arith.constant 0.0 : f32
  %el = tensor.empty() : tensor<f32>
  %zl = linalg.fill ins(%c0 : f32) outs(%el : tensor<f32>) -> tensor<f32>
  // expected-error @+1 {{'linalg.generic' op reads a value of type 'f32' defined outside its body that depends on a parameter; par-autodiff differentiates only tensors read there with tensor.extract}}
  %l = linalg.generic {indexing_maps = [#v, #r1], iterator_types = ["reduction"]}
      ins(%x : tensor<2xf32>) outs(%zl : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %p = arith.mulf %a, %s : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a read nested deeper than the body (here in an scf.if) is
// rejected, naming the reading op.
#v = affine_map<(i) -> (i)>
#r1 = affine_map<(i) -> ()>
func.func @nested_read(%x: tensor<2xf32>, %w: tensor<2xf32> {par.param}) -> tensor<f32> {
  %c0 = arith.constant 0.0 : f32
  %el = tensor.empty() : tensor<f32>
  %zl = linalg.fill ins(%c0 : f32) outs(%el : tensor<f32>) -> tensor<f32>
  // expected-error @+1 {{reads a tensor defined outside its body through 'tensor.extract'; par-autodiff differentiates only tensor.extract directly in the body}}
  %l = linalg.generic {indexing_maps = [#v, #r1], iterator_types = ["reduction"]}
      ins(%x : tensor<2xf32>) outs(%zl : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %i = linalg.index 0 : index
    %pos = arith.cmpf ogt, %a, %c0 : f32
    %t = scf.if %pos -> f32 {
      %r = tensor.extract %w[%i] : tensor<2xf32>
      scf.yield %r : f32
    } else {
      scf.yield %c0 : f32
    }
    %r = arith.addf %acc, %t : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that an op without an adjoint that reads a parameter from above
// (here tensor.generate) is named rather than given a zero gradient.
func.func @generate(%w: tensor<4xf32> {par.param}) -> tensor<f32> {
  // expected-error @+1 {{'tensor.generate' op cannot be differentiated by par-autodiff}}
  %g = tensor.generate {
  ^bb0:
    %c1 = arith.constant 1 : index
    %v = tensor.extract %w[%c1] : tensor<4xf32>
    tensor.yield %v : f32
  } : tensor<f32>
  return %g : tensor<f32>
}

// -----

// Tests that a body op without a tangent rule on a gathered element is
// named (the scatter-add's body cannot be built).
func.func @gather_no_tangent(%w: tensor<4xf32> {par.param},
                             %ids: tensor<3xindex>) -> tensor<f32> {
  %e = tensor.empty() : tensor<3xf32>
  // expected-error @+1 {{'linalg.generic' op has a body op par-autodiff cannot differentiate: 'math.sin'}}
  %s = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>,
                                        affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]}
      ins(%ids : tensor<3xindex>) outs(%e : tensor<3xf32>) {
  ^bb0(%i: index, %o: f32):
    %x = tensor.extract %w[%i] : tensor<4xf32>
    %r = math.sin %x : f32
    linalg.yield %r : f32
  } -> tensor<3xf32>
  %c0 = arith.constant 0.0 : f32
  %z0 = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%c0 : f32) outs(%z0 : tensor<f32>) -> tensor<f32>
  %l = linalg.reduce ins(%s : tensor<3xf32>) outs(%z : tensor<f32>) dimensions = [0]
    (%a: f32, %acc: f32) {
      %t = arith.addf %a, %acc : f32
      linalg.yield %t : f32
    }
  return %l : tensor<f32>
}

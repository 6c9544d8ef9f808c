// RUN: par-opt %s --par-autodiff -split-input-file -verify-diagnostics | FileCheck %s

// Tests the gradient function's interface: same arguments (without
// par.param), the loss then one gradient per parameter in argument order;
// the forward function is kept and links its gradient (par.grad, what
// par-optimizer follows). A reduction's sum combiner, an elementwise
// tanh and a matmul are differentiated into generics; a fill stays a fill.
// CHECK-LABEL: func.func @loss(
// CHECK-SAME:    attributes {par.grad = @loss_grad}
// CHECK-LABEL: func.func @loss_grad(
// CHECK-SAME:    %{{.*}}: tensor<4x3xf32>, %{{.*}}: tensor<3x2xf32>, %{{.*}}: tensor<2xf32>)
// CHECK-SAME:    -> (tensor<f32>, tensor<3x2xf32>, tensor<2xf32>)
// CHECK-NOT:     par.param
// CHECK:         linalg.fill
// CHECK:         math.tanh
// CHECK:         return %{{.*}}, %{{.*}}, %{{.*}} : tensor<f32>, tensor<3x2xf32>, tensor<2xf32>
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (j)>
#red = affine_map<(i, j) -> ()>
func.func @loss(%x: tensor<4x3xf32>, %w: tensor<3x2xf32> {par.param}, %b: tensor<2xf32> {par.param}) -> tensor<f32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x2xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<4x2xf32>) -> tensor<4x2xf32>
  %m = linalg.matmul ins(%x, %w : tensor<4x3xf32>, tensor<3x2xf32>) outs(%z : tensor<4x2xf32>) -> tensor<4x2xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m, %b : tensor<4x2xf32>, tensor<2xf32>) outs(%e : tensor<4x2xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    linalg.yield %s : f32
  } -> tensor<4x2xf32>
  %t = math.tanh %y : tensor<4x2xf32>
  %el = tensor.empty() : tensor<f32>
  %zl = linalg.fill ins(%c0 : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["reduction", "reduction"]}
      ins(%t : tensor<4x2xf32>) outs(%zl : tensor<f32>) {
  ^bb0(%v: f32, %acc: f32):
    %r = arith.addf %acc, %v : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a loss that is not a scalar is rejected.
// expected-error @+1 {{the loss must be a scalar floating-point tensor (e.g. tensor<f32>), got 'tensor<4xf32>'}}
func.func @vector_loss(%w: tensor<4xf32> {par.param}) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}

// -----

// Tests that a parameter must be a floating-point tensor.
// expected-error @+1 {{parameter #0 must be a floating-point tensor, got 'tensor<4xi32>'}}
func.func @int_param(%w: tensor<4xi32> {par.param}) -> tensor<f32> {
  %c = arith.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}

// -----

// Tests that an op without an adjoint is named.
func.func @no_adjoint(%w: tensor<4xf32> {par.param}) -> tensor<f32> {
  %c0 = arith.constant 0.0 : f32
  // expected-error @+1 {{'tensor.pad' op cannot be differentiated by par-autodiff}}
  %p = tensor.pad %w low[1] high[1] {
  ^bb0(%i: index):
    tensor.yield %c0 : f32
  } : tensor<4xf32> to tensor<6xf32>
  %e = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %l = linalg.reduce ins(%p : tensor<6xf32>) outs(%z : tensor<f32>) dimensions = [0]
    (%a: f32, %acc: f32) {
      %s = arith.addf %a, %acc : f32
      linalg.yield %s : f32
    }
  return %l : tensor<f32>
}

// -----

// Tests that a body op without a tangent rule is named (the name is taken
// before the unfinished adjoint generic holding its clone is erased).
#id = affine_map<(d0) -> (d0)>
func.func @no_tangent(%w: tensor<4xf32> {par.param}) -> tensor<f32> {
  %e = tensor.empty() : tensor<4xf32>
  // expected-error @+1 {{'linalg.generic' op has a body op par-autodiff cannot differentiate: 'math.sin'}}
  %s = linalg.generic {indexing_maps = [#id, #id],
                       iterator_types = ["parallel"]}
      ins(%w : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.sin %a : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %c0 = arith.constant 0.0 : f32
  %z0 = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%c0 : f32) outs(%z0 : tensor<f32>) -> tensor<f32>
  %l = linalg.reduce ins(%s : tensor<4xf32>) outs(%z : tensor<f32>) dimensions = [0]
    (%a: f32, %acc: f32) {
      %t = arith.addf %a, %acc : f32
      linalg.yield %t : f32
    }
  return %l : tensor<f32>
}

// -----

// Tests that a pipeline stage's gradients are pinned to their arguments'
// shardings (the runner sums them into the update's arguments and sends the
// input's gradient back as the previous stage's dy, byte for byte): a split
// weight's, a replicated weight's (no annotation: replicated on the stage's
// mesh) and the stage input's (a par.param of the stage).
// CHECK-LABEL: func.func @stage_grad(
// CHECK-SAME:    -> (tensor<f32>,
// CHECK-SAME:        tensor<3x2xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
// CHECK-SAME:        tensor<2x2xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>},
// CHECK-SAME:        tensor<4x3xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>})
par.mesh @mesh ["dp"=2, "tp"=2]
func.func @stage(%w: tensor<3x2xf32> {par.param, par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
                 %v: tensor<2x2xf32> {par.param},
                 %x: tensor<4x3xf32> {par.param, par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<f32>
    attributes {par.stage = 1 : i64, par.stage_args = array<i64: 2, 3>} {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x2xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<4x2xf32>) -> tensor<4x2xf32>
  %m = linalg.matmul ins(%x, %w : tensor<4x3xf32>, tensor<3x2xf32>) outs(%z : tensor<4x2xf32>) -> tensor<4x2xf32>
  %n = linalg.matmul ins(%m, %v : tensor<4x2xf32>, tensor<2x2xf32>) outs(%z : tensor<4x2xf32>) -> tensor<4x2xf32>
  %el = tensor.empty() : tensor<f32>
  %zl = linalg.fill ins(%c0 : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %l = linalg.reduce ins(%n : tensor<4x2xf32>) outs(%zl : tensor<f32>) dimensions = [0, 1]
    (%a: f32, %acc: f32) {
      %s = arith.addf %a, %acc : f32
      linalg.yield %s : f32
    }
  return %l : tensor<f32>
}

// -----

// Tests that a product reduction (not differentiable by this pass; sums,
// maxima and minima are) is named.
func.func @prod_reduce(%w: tensor<4xf32> {par.param}) -> tensor<f32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<f32>) -> tensor<f32>
  // expected-error @+1 {{reduces with a combiner par-autodiff cannot differentiate (only sums, maxima and minima)}}
  %l = linalg.reduce ins(%w : tensor<4xf32>) outs(%z : tensor<f32>) dimensions = [0]
    (%a: f32, %acc: f32) {
      %s = arith.mulf %a, %acc : f32
      linalg.yield %s : f32
    }
  return %l : tensor<f32>
}

// -----

// Tests that a module without parameters is an error, not a silent no-op.
// expected-error @+1 {{par-autodiff: no function has arguments marked par.param, so there is nothing to differentiate}}
module {
  func.func @no_params(%w: tensor<4xf32>) -> tensor<f32> {
    %c = arith.constant dense<0.0> : tensor<f32>
    return %c : tensor<f32>
  }
}

// RUN: par-opt %s --par-autodiff --par-optimizer=optimizer=adamw -split-input-file -verify-diagnostics | FileCheck %s

// Tests the AdamW step's interface: f's arguments, then m and v per
// parameter (sharded like it), then the step number; results: loss, new
// parameters, new m, new v, t + 1, with the feedback pairs that let a
// driver iterate it and initialisers for the state (zeros) and the step
// number (ones). One generic per parameter updates the
// parameter and its state together. The step links the gradient it calls
// (par.grad), and the loss links its step (par.step).
// CHECK:       func.func @loss({{.*}} attributes {par.grad = @loss_grad, par.step = @loss_step}
// CHECK-LABEL: func.func @loss_step(
// CHECK-SAME:    %arg0: tensor<4x3xf32>, %arg1: tensor<3x2xf32> {par.sharding = #par.sharding<@mesh, [{}, {"x"}]>},
// CHECK-SAME:    %arg2: tensor<3x2xf32> {par.init = #par.init<zeros>, par.sharding = #par.sharding<@mesh, [{}, {"x"}]>},
// CHECK-SAME:    %arg3: tensor<3x2xf32> {par.init = #par.init<zeros>, par.sharding = #par.sharding<@mesh, [{}, {"x"}]>}, %arg4: tensor<f32> {par.init = #par.init<ones>})
// CHECK-SAME:    -> (tensor<f32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<f32>)
// CHECK-SAME:    attributes {par.feedback = array<i64: 1, 1, 2, 2, 3, 3, 4, 4>, par.grad = @loss_grad}
// CHECK:         call @loss_grad
// CHECK:         linalg.generic
// CHECK:           math.powf
// CHECK:           math.sqrt
// CHECK:         return
par.mesh @mesh ["x"=2]
func.func @loss(%x: tensor<4x3xf32>, %w: tensor<3x2xf32> {par.param, par.sharding = #par.sharding<@mesh, [{}, {"x"}]>}) -> tensor<f32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x2xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<4x2xf32>) -> tensor<4x2xf32>
  %m = linalg.matmul ins(%x, %w : tensor<4x3xf32>, tensor<3x2xf32>) outs(%z : tensor<4x2xf32>) -> tensor<4x2xf32>
  %el = tensor.empty() : tensor<f32>
  %zl = linalg.fill ins(%c0 : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %l = linalg.reduce ins(%m : tensor<4x2xf32>) outs(%zl : tensor<f32>) dimensions = [0, 1]
    (%a: f32, %acc: f32) {
      %s = arith.addf %a, %acc : f32
      linalg.yield %s : f32
    }
  return %l : tensor<f32>
}

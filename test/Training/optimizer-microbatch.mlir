// RUN: par-opt %s --par-autodiff "--par-optimizer=optimizer=sgd micro-batches=2" | FileCheck %s
// RUN: par-opt %s --par-autodiff "--par-optimizer=optimizer=sgd micro-batches=2" "--par-spmd=report=true bucket-bytes=0" -o /dev/null | FileCheck %s --check-prefix=COMM

// Tests gradient accumulation: the model is one micro-batch (4 rows); the
// step takes 2 of them (8 rows, still sharded over "x"), views the data as
// [4, 2, 3], slices micro-batch k = rows 2i + k out of the unsharded dim,
// calls the gradient once per micro-batch and averages loss and gradients.
// CHECK-LABEL: func.func @loss_step(
// CHECK-SAME:    %[[X:.*]]: tensor<8x3xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>}, %[[W:.*]]: tensor<3x2xf32>)
// CHECK-SAME:    attributes {par.feedback = array<i64: 1, 1>, par.grad = @loss_grad, par.micro_batches = 2 : i64}
// CHECK:         %[[V:.*]] = tensor.expand_shape %[[X]] {{\[}}[0, 1], [2]] output_shape [4, 2, 3] : tensor<8x3xf32> into tensor<4x2x3xf32>
// CHECK:         %[[M0:.*]] = tensor.extract_slice %[[V]][0, 0, 0] [4, 1, 3] [1, 1, 1] : tensor<4x2x3xf32> to tensor<4x3xf32>
// CHECK:         %[[M1:.*]] = tensor.extract_slice %[[V]][0, 1, 0] [4, 1, 3] [1, 1, 1] : tensor<4x2x3xf32> to tensor<4x3xf32>
// CHECK:         %[[G0:.*]]:2 = call @loss_grad(%[[M0]], %[[W]])
// CHECK:         %[[G1:.*]]:2 = call @loss_grad(%[[M1]], %[[W]])
// CHECK:         linalg.generic {{.*}} ins(%[[G0]]#0, %[[G1]]#0
// CHECK:           arith.addf
// CHECK:         linalg.generic {{.*}} ins(%[[G0]]#1, %[[G1]]#1
// CHECK:           arith.addf
// CHECK:         arith.constant 5.000000e-01
// CHECK:         arith.constant 5.000000e-01
// CHECK:         return
// The micro-batch split itself moves no data. The gradient's reductions
// (loss and dW over "x") run once per step in the step, on the sums of the
// micro-batches' partial values (par-sink-reductions): the step calls a
// clone of @loss_grad that reduces nothing.
// COMM-LABEL: par-comm-report: @loss_grad
// COMM-NEXT:    par.all_reduce axes=["x"] n=2 f32 tensor<f32>: 4 bytes
// COMM-NEXT:    par.all_reduce axes=["x"] n=2 f32 tensor<3x2xf32>: 24 bytes
// COMM-LABEL: par-comm-report: @loss_grad_partial
// COMM-NEXT:    total: 0 collectives, 0 bytes per device
// COMM-LABEL: par-comm-report: @loss_step
// COMM-NEXT:    par.all_reduce axes=["x"] n=2 f32 tensor<f32>: 4 bytes
// COMM-NEXT:    par.all_reduce axes=["x"] n=2 f32 tensor<3x2xf32>: 24 bytes
// COMM-NEXT:    total: 2 collectives, 28 bytes per device
par.mesh @mesh ["x"=2]
func.func @loss(%x: tensor<4x3xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>}, %w: tensor<3x2xf32> {par.param}) -> tensor<f32> {
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

// RUN: par-opt %s "--par-loss-scale=init-scale=1024 hysteresis=2" | FileCheck %s --check-prefix=SCALE
// RUN: par-opt %s "--par-loss-scale=init-scale=1024 hysteresis=2" --par-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: par-opt %s "--par-loss-scale=init-scale=1024 hysteresis=2" --par-autodiff --par-optimizer=optimizer=sgd | FileCheck %s --check-prefix=STEP
// RUN: par-opt %s "--par-loss-scale=init-scale=1024 hysteresis=2" --par-autodiff --par-optimizer=optimizer=sgd --par-spmd | FileCheck %s --check-prefix=SPMD
// RUN: par-opt %s "--par-loss-scale=policy=static init-scale=8" | FileCheck %s --check-prefix=STATIC

// par-loss-scale adds the scale argument (f32 scalar, the policy, and the
// initialiser filling it with the policy's init) and returns the loss
// through par.scale_loss.
// SCALE-LABEL: func.func @loss(
// SCALE-SAME:    %arg2: tensor<f32> {par.init = #par.init<fill, 1.024000e+03>, par.loss_scale = #par.loss_scale<kind = dynamic, init = 1.024000e+03, growth = 2.000000e+00, backoff = 5.000000e-01, interval = 2000, hysteresis = 2, min = 1.000000e+00>})
// SCALE-SAME:    -> tensor<f32>
// SCALE:         %[[L:.*]] = linalg.reduce
// SCALE:         %[[S:.*]] = par.scale_loss %[[L]] by %arg2 : tensor<f32>
// SCALE-NEXT:    return %[[S]] : tensor<f32>
// STATIC:        %arg2: tensor<f32> {par.init = #par.init<fill, 8.000000e+00>, par.loss_scale = #par.loss_scale<kind = static, init = 8.000000e+00,

// par-autodiff: the gradient takes the scale too; it returns the true loss
// and seeds the backward with 1 x scale.
// GRAD-LABEL: func.func @loss_grad(
// GRAD-SAME:    %arg2: tensor<f32> {par.init = #par.init<fill, 1.024000e+03>, par.loss_scale = #par.loss_scale<kind = dynamic
// GRAD:         %[[L:.*]] = linalg.generic {{.*}} iterator_types = ["reduction", "reduction"]}
// GRAD:         %[[ONE:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<f32>)
// GRAD:         %[[SEED:.*]] = linalg.generic {{.*}} ins(%[[ONE]], %arg2 : tensor<f32>, tensor<f32>)
// GRAD-NEXT:      ^bb0
// GRAD-NEXT:        arith.mulf
// GRAD-NOT:     par.scale_loss
// GRAD:         return %[[L]], %{{.*}} : tensor<f32>, tensor<3x2xf32>

// par-optimizer: the step unscales the gradient (x 1/scale), decides over
// the whole mesh whether it is finite, selects the update or the old
// parameter, and computes the next scale state (scale, good-step count
// from 0, hysteresis tracker from the policy's 2), fed back with the
// parameter; par.loss_scale_results names the next scale (result 2) and
// the finite flag (result 5).
// STEP-LABEL: func.func @loss_step(
// STEP-SAME:    %arg2: tensor<f32> {par.init = #par.init<fill, 1.024000e+03>, par.loss_scale = #par.loss_scale<kind = dynamic
// STEP-SAME:    %arg3: tensor<f32> {par.init = #par.init<zeros>}, %arg4: tensor<f32> {par.init = #par.init<fill, 2.000000e+00>})
// STEP-SAME:    -> (tensor<f32>, tensor<3x2xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
// STEP-SAME:    par.feedback = array<i64: 1, 1, 2, 2, 3, 3, 4, 4>
// STEP-SAME:    par.loss_scale_results = array<i64: 2, 5>
// STEP:         %[[G:.*]]:2 = call @loss_grad(%arg0, %arg1, %arg2)
// STEP:         %[[INV:.*]] = linalg.generic {{.*}} ins(%arg2 : tensor<f32>)
// STEP:           arith.divf
// STEP:         %[[U:.*]] = linalg.generic {{.*}} ins(%[[G]]#1, %[[INV]] : tensor<3x2xf32>, tensor<f32>)
// STEP:           arith.mulf
// STEP:         %[[OK:.*]] = par.all_finite %[[U]] over @mesh : tensor<3x2xf32>
// STEP:         %[[NEW:.*]] = linalg.generic {{.*}} ins(%arg1, %[[U]] : tensor<3x2xf32>, tensor<3x2xf32>)
// STEP:         %[[SEL:.*]] = linalg.generic {{.*}} ins(%[[OK]], %[[NEW]], %arg1 : tensor<f32>, tensor<3x2xf32>, tensor<3x2xf32>)
// STEP:           arith.cmpf ogt
// STEP:           arith.select
// STEP:         %[[NS:.*]], %[[NG:.*]], %[[NH:.*]] = par.update_loss_scale %arg2, %arg3, %arg4 finite %[[OK]] policy <kind = dynamic, init = 1.024000e+03, growth = 2.000000e+00, backoff = 5.000000e-01, interval = 2000, hysteresis = 2, min = 1.000000e+00>
// STEP:         return %[[G]]#0, %[[SEL]], %[[NS]], %[[NG]], %[[NH]], %[[OK]]

// par-spmd: the decision is this device's check, then a min over every
// mesh axis (both dp, which splits the data, and tp, which splits the
// weight), so that every rank takes the same decision.
// SPMD-LABEL: func.func @loss_step(
// SPMD:         %[[LOCAL:.*]] = par.all_finite %{{.*}} : tensor<3x1xf32>
// SPMD-NEXT:    %[[OK:.*]] = par.all_reduce %[[LOCAL]] on @mesh axes = ["dp", "tp"] kind = min : tensor<f32>
// SPMD-DAG:     ins(%[[OK]], %{{.*}}, %arg1 : tensor<f32>, tensor<3x1xf32>, tensor<3x1xf32>)
// SPMD-DAG:     par.update_loss_scale %arg2, %arg3, %arg4 finite %[[OK]]
par.mesh @mesh ["dp"=2, "tp"=2]
func.func @loss(%x: tensor<4x3xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
                %w: tensor<3x2xf32> {par.param, par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}) -> tensor<f32> {
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

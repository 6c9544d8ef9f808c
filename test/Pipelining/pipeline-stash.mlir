// RUN: par-opt %S/Inputs/pipeline-mlp.mlir --par-pipeline-split=stages=2 --par-autodiff "--par-optimizer=micro-batches=4" "--par-pipeline-schedule=schedule=1f1b micro-batches=4" --par-split-constants --par-sharding-propagation "--par-pipeline-stash=report=true" | FileCheck %s
// RUN: par-opt %S/Inputs/pipeline-mlp.mlir "--par-pipeline-split=stages=2 split-backward=true" --par-autodiff "--par-optimizer=micro-batches=4" "--par-pipeline-schedule=schedule=zbh1 micro-batches=4" --par-split-constants --par-sharding-propagation "--par-pipeline-stash=report=true" | FileCheck %s --check-prefix=ZB

// Tests that each stage backward of a 1F1B pipeline (the stage's forward,
// then its adjoints) is split at the values the adjoints read: stage 0
// (x @ w1, tanh, @ w2, tanh) keeps a = x w1, tanh(a) and b = tanh(a) w2
// (the adjoints of tanh read its input, the weight gradients the matmul
// inputs), stage 1 likewise; each side of a residual carries its
// propagated sharding; the backward starts from the output gradient (no
// forward matmul of x), its first result a zero; the stage table names
// both functions.
// CHECK: par-pipeline-stash: stage 0: @loss_s0_fwd_res keeps 3 residuals (1536 bytes, global) for @loss_s0_bwd
// CHECK: par-pipeline-stash: stage 1: @loss_s1_fwd_res keeps 3 residuals (4224 bytes, global) for @loss_s1_bwd
// CHECK: stash_forward = @loss_s0_fwd_res, stash_backward = @loss_s0_bwd
// CHECK-SAME: stash_forward = @loss_s1_fwd_res, stash_backward = @loss_s1_bwd
// CHECK-LABEL: func.func @loss_s0_fwd_res(
// CHECK-SAME: %[[X:.*]]: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %[[W1:.*]]: tensor<16x16xf32>, %[[W2:.*]]: tensor<16x16xf32>)
// CHECK-SAME: -> (tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>})
// CHECK-SAME: attributes {par.stage = 0 : i64, par.stage_args = array<i64: 0, 1, 2>}
// CHECK:   %[[A:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[W1]] :
// CHECK:   %[[TA:.*]] = linalg.generic {{.*}} ins(%[[A]] :
// CHECK:   %[[B:.*]] = linalg.generic {{.*}} ins(%[[TA]], %[[W2]] :
// CHECK:   %[[Y:.*]] = linalg.generic {{.*}} ins(%[[B]] :
// CHECK:   return %[[Y]], %[[A]], %[[TA]], %[[B]] :
// CHECK-LABEL: func.func @loss_s0_bwd(
// CHECK-SAME: %arg0: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %arg1: tensor<16x16xf32>, %arg2: tensor<16x16xf32>, %arg3: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %arg4: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %arg5: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %arg6: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>})
// CHECK-SAME: -> (tensor<f32>, tensor<16x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}, tensor<16x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>})
// CHECK-NOT:   ins(%arg0, %arg1 :
// CHECK:       ins(%arg6,
// CHECK:       ins(%arg5,
// CHECK:   %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : tensor<f32>
// CHECK:   return %[[ZERO]],
// CHECK-LABEL: func.func @loss_s1_fwd_res(
// CHECK-SAME: -> (tensor<f32>, tensor<8x64xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, tensor<8x64xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, tensor<8x4xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>})
// CHECK-LABEL: func.func @loss_s1_bwd(
// CHECK-SAME: -> (tensor<f32>, tensor<16x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}, tensor<64x4xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}, tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>})

// ZB-H1's halves: stage 1's backward split again into BI (the input
// gradient, from the output gradient back through the stage: its
// arguments -> (0, dx, what BW reads)) and BW (the weight gradients on the
// residuals and those); stage 0 has no dx, so its BW is its backward.
// ZB: par-pipeline-stash: stage 0: @loss_s0_fwd_res keeps 3 residuals (1536 bytes, global) for @loss_s0_bwd
// ZB-NEXT: par-pipeline-stash: stage 1: @loss_s1_fwd_res keeps 3 residuals (4224 bytes, global) for @loss_s1_bwd
// ZB-NEXT: par-pipeline-stash: stage 1: @loss_s1_bwd_input (BI) keeps 2 values for @loss_s1_bwd_weight (BW)
// ZB: stash_forward = @loss_s0_fwd_res, stash_backward = @loss_s0_bwd, stash_weight_grad = @loss_s0_bwd>
// ZB-SAME: stash_forward = @loss_s1_fwd_res, stash_backward = @loss_s1_bwd, stash_input_grad = @loss_s1_bwd_input, stash_weight_grad = @loss_s1_bwd_weight>
// ZB-LABEL: func.func @loss_s1_bwd_input(
// ZB-SAME: -> (tensor<f32>, tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, tensor<8x4xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, tensor<8x64xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>})
// ZB-LABEL: func.func @loss_s1_bwd_weight(
// ZB-SAME: %arg7: tensor<8x4xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %arg8: tensor<8x64xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>})
// ZB-SAME: -> (tensor<f32>, tensor<16x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}, tensor<64x4xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>})

// RUN: par-opt %S/Inputs/pipeline-mlp.mlir --par-pipeline-split=stages=2 --par-autodiff "--par-optimizer=micro-batches=4" "--par-pipeline-schedule=schedule=1f1b micro-batches=4 diagram=true" | FileCheck %s
// RUN: par-opt %S/Inputs/pipeline-mlp.mlir --par-pipeline-split=stages=2 --par-autodiff "--par-optimizer=micro-batches=4" "--par-pipeline-schedule=schedule=1f1b diagram=true" | FileCheck %s
// RUN: par-opt %S/Inputs/pipeline-mlp.mlir --par-pipeline-split=stages=2 --par-autodiff "--par-optimizer=micro-batches=4" "--par-pipeline-schedule=schedule=gpipe micro-batches=4 diagram=true" | FileCheck %s --check-prefix=GPIPE
// RUN: par-opt %S/Inputs/pipeline-mlp.mlir --par-pipeline-split=stages=4 --par-autodiff "--par-optimizer=micro-batches=4" "--par-pipeline-schedule=schedule=interleaved virtual=2 micro-batches=4" --par-verify-pipeline | FileCheck %s --check-prefix=INTER
// RUN: par-opt %S/Inputs/pipeline-mlp.mlir "--par-pipeline-split=stages=4 split-backward=true" --par-autodiff "--par-optimizer=micro-batches=4" "--par-pipeline-schedule=schedule=zbv virtual=2 micro-batches=4 diagram=true" --par-verify-pipeline | FileCheck %s --check-prefix=ZBV
// RUN: par-opt %S/Inputs/pipeline-mlp.mlir "--par-pipeline-split=stages=4 split-backward=true" --par-autodiff "--par-optimizer=micro-batches=4" "--par-pipeline-schedule=schedule=zbv virtual=2 micro-batches=4 diagram=true stage-costs=false" --par-verify-pipeline | FileCheck %s --check-prefix=ZBVUNIT

// Tests the pipeline programs in the IR: 1F1B over the "pp" axis (2 ranks)
// with 4 micro-batches. The timeline (unit costs: F = 1, B = 2) has the
// (p-1)/(m+p-1) = 1/5 bubble, and every rank's ordered actions, transfers
// included, are stored in the module's par.pipeline. Without micro-batches
// the schedule takes the train step's 4 (the second RUN line).
// CHECK:      par-pipeline-schedule: 1f1b p=2 m=4 v=1 (unit costs: F=1, B=2)
// CHECK:      rank 0 | F0 F1 .  .  B0 B0 F2 B1 B1 F3 B2 B2 .  B3 B3
// CHECK-NEXT: rank 1 | .  F0 B0 B0 F1 B1 B1 F2 B2 B2 F3 B3 B3 .  .
// CHECK:        bubble fraction 0.2, peak activations on rank 0: 2
// The stage table gets what par-autodiff and par-optimizer made from each
// stage (their par.grad and par.update links), the pipeline the train step
// (par.step) and one typed program per rank.
// CHECK:      module attributes {par.pipeline = #par.pipeline<func = @loss, stages = [
// CHECK-SAME:   #par.stage<forward = @loss_s0_fwd, loss = @loss_s0, backward = @loss_s0_grad, update = @loss_s0_update>,
// CHECK-SAME:   #par.stage<forward = @loss_s1_fwd, loss = @loss_s1, backward = @loss_s1_grad, update = @loss_s1_update>],
// CHECK-SAME:   step = @loss_step, schedule = "1f1b", axis = "pp", micro_batches = 4, programs = [
// CHECK-SAME:   #par.program<[fwd(mb=0, s=0), send_act(mb=0, s=1, to=1), fwd(mb=1, s=0), send_act(mb=1, s=1, to=1), recv_grad(mb=0, s=1, from=1), bwd(mb=0, s=0)
// CHECK-SAME:   #par.program<[recv_act(mb=0, s=1, from=0), fwd(mb=0, s=1), recv_act(mb=1, s=1, from=0), bwd(mb=0, s=1), send_grad(mb=0, s=1, to=0)
// CHECK-SAME:   ]>
// The links: each stage's loss names its gradient and update.
// CHECK-LABEL: func.func @loss_s0(
// CHECK-SAME:    attributes {par.grad = @loss_s0_grad, par.stage = 0 : i64, par.stage_args = array<i64: 0, 1, 2>, par.update = @loss_s0_update}
// The stage updates: parameters, summed gradients (averaged over the 4
// micro-batches inside), state; the stage they belong to.
// CHECK-LABEL: func.func @loss_s0_update(
// CHECK-SAME:    attributes {par.stage = 0 : i64, par.stage_args = array<i64: 1, 2>}
// CHECK:         arith.constant 2.500000e-01

// GPipe: all forwards, then all backwards; all 4 activations in flight.
// GPIPE:      rank 0 | F0 F1 F2 F3 .  .  .  B0 B0 B1 B1 B2 B2 B3 B3
// GPIPE:        bubble fraction 0.2, peak activations on rank 0: 4

// Interleaved: 4 stages, 2 per rank (stage s on rank s mod 2).
// INTER: schedule = "interleaved", axis = "pp", micro_batches = 4, programs = [
// INTER-SAME: #par.program<[fwd(mb=0, s=0), send_act(mb=0, s=1, to=1), fwd(mb=1, s=0), recv_act(mb=0, s=2, from=1)

// ZB-H1: the split also makes each stage's input-gradient (_bi, stages > 0)
// and weight-gradient (_bw) halves; the programs run BI and BW apart, and
// the weight gradients fill the bubbles.
// RUN: par-opt %S/Inputs/pipeline-mlp.mlir "--par-pipeline-split=stages=2 split-backward=true" --par-autodiff "--par-optimizer=micro-batches=4" "--par-pipeline-schedule=schedule=zbh1 micro-batches=4 diagram=true" | FileCheck %s --check-prefix=ZB
// ZB:      rank 0 | F0 F1 .  B0 W0 F2 B1 W1 F3 B2 W2 B3 W3
// ZB-NEXT: rank 1 | .  F0 B0 F1 B1 W0 F2 B2 W1 F3 B3 W2 W3
// ZB:      bubble fraction 0.0769231, peak activations on rank 0: 2
// ZB:      #par.stage<forward = @loss_s0_fwd, loss = @loss_s0, weight_loss = @loss_s0_bw, backward = @loss_s0_grad, weight_grad = @loss_s0_bw_grad, update = @loss_s0_update>
// ZB-SAME: #par.stage<forward = @loss_s1_fwd, loss = @loss_s1, input_loss = @loss_s1_bi, weight_loss = @loss_s1_bw, backward = @loss_s1_grad, input_grad = @loss_s1_bi_grad, weight_grad = @loss_s1_bw_grad, update = @loss_s1_update>
// ZB-SAME: schedule = "zbh1"
// ZB-SAME: bi(mb=0, s=0), bw(mb=0, s=0)
// ZB-LABEL: func.func @loss_s0_bw(
// ZB-SAME:    %arg1: tensor<16x16xf32> {par.param}
// ZB-SAME:    par.stage_part = "weight"
// ZB-NOT:   func.func @loss_s0_bi(
// ZB-LABEL: func.func @loss_s1_bi(
// ZB-SAME:    %arg1: tensor<16x64xf32>, %arg2: tensor<64x4xf32>, %arg3: tensor<8x16xf32> {par.param, par.sharding
// ZB-SAME:    par.stage_part = "input"
// ZB-NOT:   func.func @loss_s1_bi_update

// ZB-V list-schedules on each stage's estimated costs (its functions'
// FLOPs + 4 per byte, scaled to a mean forward of 1): stage 0 has no input
// gradient, so its BI is the floor (0.01) and its BW the whole backward,
// more than its forward; the layers differ (the third stage's 16x64 matmul
// costs more than the first two's 16x16). stage-costs=false keeps unit
// costs. Both verify.
// ZBV: par-pipeline-schedule: zbv p=2 m=4 v=2 (estimated stage costs F:BI:BW [[F0:[0-9.]+]]:0.01:1.{{[0-9]+}}, [[F0]]:{{[0-9.]+}}:{{[0-9.]+}}, 1.9{{[0-9]+}}:{{[0-9.]+}}:{{[0-9.]+}}, 0.{{[0-9]+}}:{{[0-9.]+}}:{{[0-9.]+}})
// ZBV: rank 0 | F0.0@0-[[F0]] F1.0@
// ZBV: schedule = "zbv"
// ZBVUNIT: par-pipeline-schedule: zbv p=2 m=4 v=2 (unit costs: F=1, B=2)
// ZBVUNIT: rank 0 | F0.0 F1.0 F2.0 F0.1 B0.1
// ZBVUNIT: schedule = "zbv"

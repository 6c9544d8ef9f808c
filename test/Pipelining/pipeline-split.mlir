// RUN: sed 's/ {par.stage = 1}//' %s | par-opt "--par-pipeline-split=stages=2 report=true" | FileCheck %s
// RUN: sed 's/ {par.stage = 1}//' %s | par-opt "--par-pipeline-split=stages=3 report=true" | FileCheck %s --check-prefix=THREE
// RUN: par-opt %s "--par-pipeline-split=stages=2 report=true" | FileCheck %s --check-prefix=PIN
// RUN: not par-opt %s "--par-pipeline-split=stages=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not par-opt %s "--par-pipeline-split=stages=9" 2>&1 | FileCheck %s --check-prefix=MANY
// RUN: sed 's/par.stage = 1/par.stage = 5/' %s | not par-opt "--par-pipeline-split=stages=2" 2>&1 | FileCheck %s --check-prefix=RANGE
// RUN: not par-opt %S/Inputs/pipeline-residual.mlir "--par-pipeline-split=stages=4" 2>&1 | FileCheck %s --check-prefix=CUTS
// RUN: par-opt %S/Inputs/pipeline-residual.mlir "--par-pipeline-split=stages=3 report=true" | FileCheck %s --check-prefix=RESID
// RUN: par-opt %S/Inputs/pipeline-shared-init.mlir "--par-pipeline-split=stages=2" | FileCheck %s --check-prefix=SHARED

// Tests the stage split of a three-layer tanh MLP with a squared loss
// (8 ops to place). The cost model (FLOPs + 4 x bytes) balances the two
// narrow layers against the 4x wider one and the loss; the activation that
// crosses the cut keeps the sharding propagation gives it in the whole
// function (batch over "dp"), on both sides.
// CHECK:      par-pipeline-split: @loss into 2 stages (cost = FLOPs + 4 x bytes)
// CHECK-NEXT:   stage 0: ops 0..3, cost 3.712e+04, parameters 2048 bytes
// CHECK-NEXT:   stage 1: ops 4..7, cost 8.666e+04, parameters 5120 bytes
// CHECK-NEXT:   imbalance (largest / mean cost): 1.400
// The module records the split as a stage table naming each stage's
// functions by symbol (and no op keeps a propagated sharding).
// CHECK: module attributes {par.pipeline = #par.pipeline<func = @loss, stages = [
// CHECK-SAME: #par.stage<forward = @loss_s0_fwd, loss = @loss_s0>,
// CHECK-SAME: #par.stage<forward = @loss_s1_fwd, loss = @loss_s1>]>}
//
// The forward of stage 0: the arguments it uses (par.param dropped), its
// output the activation.
// CHECK-LABEL: func.func @loss_s0_fwd(
// CHECK-SAME:    %arg0: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %arg1: tensor<16x16xf32>, %arg2: tensor<16x16xf32>)
// CHECK-SAME:    -> (tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>})
// CHECK-SAME:    attributes {par.stage = 0 : i64, par.stage_args = array<i64: 0, 1, 2>}
// CHECK-COUNT-2: linalg.matmul
// CHECK:         return
// The differentiable stage 0: sum(y * dy), dy an argument.
// CHECK-LABEL: func.func @loss_s0(
// CHECK-SAME:    %arg1: tensor<16x16xf32> {par.param}, %arg2: tensor<16x16xf32> {par.param}, %arg3: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<f32>
// CHECK:         linalg.generic {{.*}}iterator_types = ["reduction", "reduction"]
// CHECK:           arith.mulf
// CHECK:           arith.addf
// The last stage takes the targets and the activation (a parameter, for its
// gradient) and returns the loss.
// CHECK-LABEL: func.func @loss_s1_fwd(
// CHECK-SAME:    %arg0: tensor<8x4xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %arg1: tensor<16x64xf32>, %arg2: tensor<64x4xf32>, %arg3: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<f32>
// CHECK-SAME:    attributes {par.stage = 1 : i64, par.stage_args = array<i64: 3, 4, 5>}
// CHECK-LABEL: func.func @loss_s1(
// CHECK-SAME:    %arg1: tensor<16x64xf32> {par.param}, %arg2: tensor<64x4xf32> {par.param}, %arg3: tensor<8x16xf32> {par.param, par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<f32>
// CHECK-NOT: par.sharding = [

// Three stages: the wide matmul alone in the middle.
// THREE:      stage 0: ops 0..3,
// THREE-NEXT: stage 1: ops 4..4,
// THREE-NEXT: stage 2: ops 5..7,

// A par.stage pin overrides the cost model: the second matmul (op 2) goes
// to stage 1, and everything after it with it.
// PIN:      stage 0: ops 0..1,
// PIN-NEXT: stage 1: ops 2..7,

// ZERO: error: par-pipeline-split needs stages >= 1 (got 0)
// MANY: error: 'func.func' op cannot be split into 9 stages: it has only 8 ops to place
// RANGE: error: 'linalg.matmul' op has par.stage = 5, out of range for 2 stages (0..1)

// A residual connection: after the second matmul two activations are live,
// so only 2 of the 3 points between ops can be cut.
// CUTS: pipeline-residual.mlir:{{.*}} error: 'func.func' op cannot be split into 4 stages: only 2 point(s) between its ops have a single activation crossing
// RESID:      stage 0: ops 0..0,
// RESID-NEXT: stage 1: ops 1..2,
// RESID-NEXT: stage 2: ops 3..3,
par.mesh @mesh ["dp"=2, "pp"=2]
func.func @loss(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
                %w1: tensor<16x16xf32> {par.param}, %w2: tensor<16x16xf32> {par.param},
                %t: tensor<8x4xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
                %w3: tensor<16x64xf32> {par.param}, %w4: tensor<64x4xf32> {par.param}) -> tensor<f32> {
  %c0 = arith.constant 0.0 : f32
  %e16 = tensor.empty() : tensor<8x16xf32>
  %z16 = linalg.fill ins(%c0 : f32) outs(%e16 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %a = linalg.matmul ins(%x, %w1 : tensor<8x16xf32>, tensor<16x16xf32>) outs(%z16 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %ta = math.tanh %a : tensor<8x16xf32>
  %b = linalg.matmul {par.stage = 1} ins(%ta, %w2 : tensor<8x16xf32>, tensor<16x16xf32>) outs(%z16 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %tb = math.tanh %b : tensor<8x16xf32>
  %e64 = tensor.empty() : tensor<8x64xf32>
  %z64 = linalg.fill ins(%c0 : f32) outs(%e64 : tensor<8x64xf32>) -> tensor<8x64xf32>
  %c = linalg.matmul ins(%tb, %w3 : tensor<8x16xf32>, tensor<16x64xf32>) outs(%z64 : tensor<8x64xf32>) -> tensor<8x64xf32>
  %tc = math.tanh %c : tensor<8x64xf32>
  %e4 = tensor.empty() : tensor<8x4xf32>
  %z4 = linalg.fill ins(%c0 : f32) outs(%e4 : tensor<8x4xf32>) -> tensor<8x4xf32>
  %d = linalg.matmul ins(%tc, %w4 : tensor<8x64xf32>, tensor<64x4xf32>) outs(%z4 : tensor<8x4xf32>) -> tensor<8x4xf32>
  %el = tensor.empty() : tensor<f32>
  %zl = linalg.fill ins(%c0 : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>], iterator_types = ["reduction", "reduction"]}
      ins(%d, %t : tensor<8x4xf32>, tensor<8x4xf32>) outs(%zl : tensor<f32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %df = arith.subf %p, %q : f32
    %sq = arith.mulf %df, %df : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}

// One zero init shared by a column-parallel and a row-parallel matmul (and
// the next layer's) carries no sharding from one to the other: propagation
// runs on the split constants, as par-spmd's does. The reduced activation
// crosses the cut replicated and the next layer's weight stays replicated
// (with the init shared both took the first matmul's split over "tp").
// SHARED-LABEL: func.func @loss_s0_fwd(
// SHARED-SAME:    -> tensor<4x8xf32> attributes {par.stage = 0
// SHARED-LABEL: func.func @loss_s1_fwd(
// SHARED-SAME:    %arg0: tensor<8x8xf32>, %arg1: tensor<4x8xf32>) -> tensor<f32>

// RUN: par-opt %s --par-autodiff "--par-optimizer=optimizer=momentum zero=3" | FileCheck %s
// RUN: par-opt %s --par-autodiff "--par-optimizer=optimizer=momentum zero=3" --par-spmd | FileCheck %s --check-prefix=PART
// RUN: par-opt %s --par-mixed-precision=compute=bf16 --par-autodiff "--par-optimizer=optimizer=momentum zero=3" --par-spmd | FileCheck %s --check-prefix=MIXED
// RUN: par-opt %s --par-autodiff "--par-optimizer=optimizer=adamw zero=3 report=true" -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: par-opt %s --par-autodiff "--par-optimizer=optimizer=momentum zero=3" "--par-spmd=report=true" -o /dev/null | FileCheck %s --check-prefix=COMM
// RUN: par-opt %s --par-autodiff "--par-optimizer=optimizer=momentum zero=1" --par-spmd -o %t.z1.mlir
// RUN: par-opt %s --par-autodiff "--par-optimizer=optimizer=momentum zero=2" --par-spmd -o %t.z2.mlir
// RUN: diff %t.z1.mlir %t.z2.mlir
// RUN: par-opt %par_src_root/test/Pipelining/Inputs/pipeline-mlp.mlir --par-pipeline-split=stages=2 --par-autodiff "--par-optimizer=zero=3" | FileCheck %s --check-prefix=PIPE

// Tests ZeRO-3 (zero=3) as annotations: h = x @ w1, y = h @ w2, loss =
// sum(y^2), the data over dp. Each parameter is kept split like its state
// (w1 [{}, {"tp"}] plus dp on dim 0; w2 [{"tp"}, {}] plus dp minor on dim
// 0) on the step's and the gradient function's arguments and on the step's
// results; no updated parameter is constrained back (no gather in the
// step). In the gradient function each parameter is constrained back to
// its own layout right before its first forward use, and w2 again before
// its backward use (dh = dy @ w2^T); w1's backward does not read w1 (x is
// data: no dx), so it has no backward gather.
// CHECK-LABEL: func.func @loss_grad(
// CHECK-SAME:    %arg1: tensor<8x4xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-SAME:    %arg2: tensor<4x8xf32> {par.sharding = #par.sharding<@mesh, [{"tp", "dp"}, {}]>}
// CHECK:         %[[W1:.*]] = par.sharding_constraint %arg1 <@mesh, [{}, {"tp"}]> {par.zero_gather = "forward"}
// CHECK-NEXT:    linalg.generic {{.*}} ins(%arg0, %[[W1]] :
// CHECK:         %[[W2:.*]] = par.sharding_constraint %arg2 <@mesh, [{"tp"}, {}]> {par.zero_gather = "forward"}
// CHECK-NEXT:    linalg.generic {{.*}} ins(%{{.*}}, %[[W2]] :
// CHECK:         %[[W2B:.*]] = par.sharding_constraint %arg2 <@mesh, [{"tp"}, {}]> {par.zero_gather = "backward"}
// CHECK-NEXT:    linalg.generic {{.*}} ins(%[[W2B]], %{{.*}} :
// CHECK-NOT:     par.zero_gather
// CHECK:         return
// CHECK-LABEL: func.func @loss_step(
// CHECK-SAME:    %arg1: tensor<8x4xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-SAME:    %arg2: tensor<4x8xf32> {par.sharding = #par.sharding<@mesh, [{"tp", "dp"}, {}]>}
// CHECK-SAME:    -> (tensor<f32>, tensor<8x4xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}, tensor<4x8xf32> {par.sharding = #par.sharding<@mesh, [{"tp", "dp"}, {}]>}
// CHECK:         call @loss_grad
// CHECK-NEXT:    par.sharding_constraint %{{.*}}#1 <@mesh, [{"dp"}, {"tp"}]>
// CHECK-NEXT:    par.sharding_constraint %{{.*}}#2 <@mesh, [{"tp", "dp"}, {}]>
// CHECK-NOT:     par.sharding_constraint
// CHECK:         return

// Tests the partitioned program: each gather an all_gather over dp right
// before its use (the forward's and the backward's of w2 stay two: CSE
// does not merge them), each gradient reduce-scattered into the split, the
// step without any collective (the update runs on the shards).
// PART-LABEL: func.func @loss_grad(
// PART-SAME:    %arg1: tensor<4x2xf32> {par.global_type = tensor<8x4xf32>
// PART-SAME:    %arg2: tensor<1x8xf32> {par.global_type = tensor<4x8xf32>
// PART:         %[[W1:.*]] = par.all_gather %arg1 on @mesh axes = ["dp"] dim = 0 {par.zero_gather = "forward"} : tensor<4x2xf32> -> tensor<8x2xf32>
// PART-NEXT:    linalg.generic {{.*}} ins(%arg0, %[[W1]] :
// PART:         %[[W2:.*]] = par.all_gather %arg2 on @mesh axes = ["dp"] dim = 0 {par.zero_gather = "forward"} : tensor<1x8xf32> -> tensor<2x8xf32>
// PART-NEXT:    linalg.generic {{.*}} ins(%{{.*}}, %[[W2]] :
// PART:         %[[W2B:.*]] = par.all_gather %arg2 on @mesh axes = ["dp"] dim = 0 {par.zero_gather = "backward"} : tensor<1x8xf32> -> tensor<2x8xf32>
// PART-DAG:     linalg.generic {{.*}} ins(%[[W2B]], %{{.*}} :
// PART-DAG:     par.reduce_scatter %{{.*}} on @mesh axes = ["dp"] dim = 0 kind = sum : tensor<2x8xf32> -> tensor<1x8xf32>
// PART-DAG:     par.reduce_scatter %{{.*}} on @mesh axes = ["dp"] dim = 0 kind = sum : tensor<8x2xf32> -> tensor<4x2xf32>
// PART-LABEL: func.func @loss_step(
// PART-NOT:     par.all_gather
// PART-NOT:     par.reduce_scatter
// PART:         return

// Tests mixed precision: the cast of each f32 master shard to bf16 runs on
// the shard and the bf16 copy is gathered (half the bytes); the gradient
// is still reduced in f32.
// MIXED-LABEL: func.func @loss_grad(
// MIXED:         arith.truncf %{{.*}} : f32 to bf16
// MIXED:         par.all_gather %{{.*}} on @mesh axes = ["dp"] dim = 0 {par.zero_gather = "forward"} : tensor<4x2xbf16> -> tensor<8x2xbf16>
// MIXED:         par.all_gather %{{.*}} on @mesh axes = ["dp"] dim = 0 {par.zero_gather = "forward"} : tensor<1x8xbf16> -> tensor<2x8xbf16>
// MIXED:         par.all_gather %{{.*}} on @mesh axes = ["dp"] dim = 0 {par.zero_gather = "backward"} : tensor<1x8xbf16> -> tensor<2x8xbf16>
// MIXED:         par.reduce_scatter %{{.*}} kind = sum : tensor<2x8xf32> -> tensor<1x8xf32>
// MIXED:         par.reduce_scatter %{{.*}} kind = sum : tensor<8x2xf32> -> tensor<4x2xf32>

// Tests the report: the gathers per parameter, the ring bytes against
// zero=1's (reduce_scatter + all_gather), the model state per rank.
// REPORT:      par-optimizer: @loss_step adamw zero=3 over ["dp"]
// REPORT-NEXT:   #1 tensor<8x4xf32> [{}, {"tp"}]: state [{"dp"}, {"tp"}], 64 bytes per rank (zero=0: 128), parameter too; gathered 1+0 (forward+backward) in f32
// REPORT-NEXT:   #2 tensor<4x8xf32> [{"tp"}, {}]: state [{"tp", "dp"}, {}], 64 bytes per rank (zero=0: 128), parameter too; gathered 1+1 (forward+backward) in f32
// REPORT-NEXT:   optimizer state per rank: 128 bytes (zero=0: 256, 2.00x less)
// REPORT-NEXT:   zero=3 per gradient call and rank (ring): reduce_scatter 64 + all_gather forward 64 + backward 32 = 160 bytes, 1.25x zero=1's 128
// REPORT-NEXT:   model state per rank: parameters 64 + gradients 64 + optimizer state 128 = 256 bytes

// COMM-LABEL: par-comm-report: @loss_grad
// COMM:         par.all_gather axes=["dp"] n=2 f32 tensor<4x2xf32> (zero=3 forward): 32 bytes
// COMM:         par.all_gather axes=["dp"] n=2 f32 tensor<1x8xf32> (zero=3 forward): 32 bytes
// COMM:         par.all_gather axes=["dp"] n=2 f32 tensor<1x8xf32> (zero=3 backward): 32 bytes
// COMM-LABEL: par-comm-report: @loss_step
// COMM-NEXT:    total: 0 collectives, 0 bytes per device

// Pipeline stages: every function of a stage takes the parameters split
// like their state and gathers each where it uses it (the forward once, the
// gradient again for its backward); the stage's update takes and returns
// them split, its gradient sums whole (the executor adds them by bytes)
// and constrained to the state's split (a reduce_scatter), with no gather
// after the update.
// PIPE-LABEL: func.func @loss_s0_fwd(
// PIPE-SAME:    %arg1: tensor<16x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// PIPE:         par.sharding_constraint %arg1 <@mesh, [{}, {}]> {par.zero_gather = "forward"}
// PIPE-LABEL: func.func @loss_s0(
// PIPE-SAME:    %arg1: tensor<16x16xf32> {par.param, par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// PIPE-LABEL: func.func @loss_s0_grad(
// PIPE-SAME:    %arg2: tensor<16x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// PIPE:         par.sharding_constraint %arg2 <@mesh, [{}, {}]> {par.zero_gather = "forward"}
// PIPE:         par.sharding_constraint %arg2 <@mesh, [{}, {}]> {par.zero_gather = "backward"}
// PIPE-LABEL: func.func @loss_s0_update(
// PIPE-SAME:    %arg0: tensor<16x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %arg1: tensor<16x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %arg2: tensor<16x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}
// PIPE-SAME:    -> (tensor<16x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, tensor<16x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>})
// PIPE:         par.sharding_constraint %arg2 <@mesh, [{"dp"}, {}]>
// PIPE-NEXT:    par.sharding_constraint %arg3 <@mesh, [{"dp"}, {}]>
// PIPE-NOT:     par.sharding_constraint
// PIPE:         return
// PIPE-LABEL: func.func @loss_s1_grad(
// PIPE:         par.sharding_constraint %arg1 <@mesh, [{}, {}]> {par.zero_gather = "forward"}

par.mesh @mesh ["dp"=2, "tp"=2]
func.func @loss(%x: tensor<4x8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
                %w1: tensor<8x4xf32> {par.param, par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
                %w2: tensor<4x8xf32> {par.param, par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> tensor<f32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<4x8xf32>, tensor<8x4xf32>) outs(%z : tensor<4x4xf32>) -> tensor<4x4xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %z2 = linalg.fill ins(%c0 : f32) outs(%e2 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = linalg.matmul ins(%h, %w2 : tensor<4x4xf32>, tensor<4x8xf32>) outs(%z2 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %el = tensor.empty() : tensor<f32>
  %zl = linalg.fill ins(%c0 : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>],
                       iterator_types = ["reduction", "reduction"]}
      ins(%y : tensor<4x8xf32>) outs(%zl : tensor<f32>) {
    ^bb0(%yv: f32, %acc: f32):
      %t = arith.mulf %yv, %yv : f32
      %r = arith.addf %acc, %t : f32
      linalg.yield %r : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}

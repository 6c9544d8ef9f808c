// RUN: par-opt %s --par-autodiff "--par-optimizer=optimizer=momentum zero=1" -split-input-file -verify-diagnostics | FileCheck %s
// RUN: par-opt %s --par-autodiff "--par-optimizer=optimizer=momentum zero=1" --par-spmd -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=PART
// RUN: par-opt %s --par-autodiff "--par-optimizer=optimizer=momentum zero=1" "--par-spmd=report=true" -split-input-file -verify-diagnostics -o /dev/null | FileCheck %s --check-prefix=COMM
// RUN: par-opt %s --par-autodiff "--par-optimizer=optimizer=adamw zero=1 report=true" -split-input-file -verify-diagnostics -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: par-opt %s --par-autodiff "--par-optimizer=optimizer=adamw report=true" -split-input-file -o /dev/null | FileCheck %s --check-prefix=REPORT0
// RUN: par-opt %s --par-autodiff "--par-optimizer=optimizer=adamw zero=1 clip-norm=1" -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=CLIP
// RUN: par-opt %s --par-autodiff "--par-optimizer=optimizer=adamw zero=1 clip-norm=1" --par-spmd=report=true -split-input-file -verify-diagnostics -o /dev/null | FileCheck %s --check-prefix=CLIPCOMM
// RUN: par-opt %s --par-autodiff "--par-optimizer=optimizer=momentum zero=1 zero-axes=tp" -split-input-file | FileCheck %s --check-prefix=AXES
// RUN: not par-opt %s --par-autodiff "--par-optimizer=zero=1 zero-axes=tq" -split-input-file 2>&1 | FileCheck %s --check-prefix=BADAXIS
// RUN: not par-opt %s --par-autodiff "--par-optimizer=zero=1 zero-axes=dp,dp" -split-input-file 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not par-opt %s --par-autodiff "--par-optimizer=zero-axes=dp" -split-input-file 2>&1 | FileCheck %s --check-prefix=NOZERO
// RUN: not par-opt %s --par-compile-pipeline="optimizer=adamw zero=-1" -split-input-file 2>&1 | FileCheck %s --check-prefix=ZEROPIPE
// RUN: par-opt %par_src_root/test/Pipelining/Inputs/pipeline-mlp.mlir --par-pipeline-split=stages=2 --par-autodiff "--par-optimizer=optimizer=momentum zero=1" | FileCheck %s --check-prefix=PIPE

// Tests ZeRO-1 (zero=1) as annotations of the unsharded step: the data is
// split over dp on dim 0, so dp is the data-parallel axis. Each state
// tensor takes its parameter's sharding plus dp on the first dimension 2
// divides locally (appended minor: w's dim 0 is already over tp, so
// ["tp", "dp"]); an unannotated parameter (b) is pinned replicated, and the
// scalar a has no such dimension (a remark; its state stays replicated).
// Parameters, their results and the state results carry their shardings
// (the feedback needs no reshard). Each gradient is constrained to its
// state's sharding right after the gradient call, each new parameter back
// to the parameter's sharding after the update.
// CHECK-LABEL: func.func @loss_step(
// CHECK-SAME:    %arg0: tensor<4x8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
// CHECK-SAME:    %arg1: tensor<8x4xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>},
// CHECK-SAME:    %arg2: tensor<4xf32> {par.sharding = #par.sharding<@mesh, [{}]>},
// CHECK-SAME:    %arg3: tensor<f32> {par.sharding = #par.sharding<@mesh, []>},
// CHECK-SAME:    %arg4: tensor<8x4xf32> {par.init = #par.init<zeros>, par.sharding = #par.sharding<@mesh, [{"tp", "dp"}, {}]>},
// CHECK-SAME:    %arg5: tensor<4xf32> {par.init = #par.init<zeros>, par.sharding = #par.sharding<@mesh, [{"dp"}]>},
// CHECK-SAME:    %arg6: tensor<f32> {par.init = #par.init<zeros>, par.sharding = #par.sharding<@mesh, []>})
// CHECK-SAME:    -> (tensor<f32>, tensor<8x4xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}, tensor<4xf32> {par.sharding = #par.sharding<@mesh, [{}]>}, tensor<f32> {par.sharding = #par.sharding<@mesh, []>},
// CHECK-SAME:        tensor<8x4xf32> {par.sharding = #par.sharding<@mesh, [{"tp", "dp"}, {}]>}, tensor<4xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}]>}, tensor<f32> {par.sharding = #par.sharding<@mesh, []>})
// CHECK:         %[[G:.*]]:4 = call @loss_grad
// CHECK-NEXT:    %[[GW:.*]] = par.sharding_constraint %[[G]]#1 <@mesh, [{"tp", "dp"}, {}]> : tensor<8x4xf32>
// CHECK-NEXT:    %[[GB:.*]] = par.sharding_constraint %[[G]]#2 <@mesh, [{"dp"}]> : tensor<4xf32>
// CHECK:         %[[UW:.*]]:2 = linalg.generic {{.*}} ins(%arg1, %[[GW]], %arg4 :
// CHECK:         %[[UB:.*]]:2 = linalg.generic {{.*}} ins(%arg2, %[[GB]], %arg5 :
// CHECK:         %[[UA:.*]]:2 = linalg.generic {{.*}} ins(%arg3, %[[G]]#3, %arg6 :
// CHECK:         %[[W:.*]] = par.sharding_constraint %[[UW]]#0 <@mesh, [{"tp"}, {}]> : tensor<8x4xf32>
// CHECK-NEXT:    %[[B:.*]] = par.sharding_constraint %[[UB]]#0 <@mesh, [{}]> : tensor<4xf32>
// CHECK-NEXT:    return %[[G]]#0, %[[W]], %[[B]], %[[UA]]#0, %[[UW]]#1, %[[UB]]#1, %[[UA]]#1

// Tests the partitioned step: the state's local types are halved over dp
// (w's 8x4 over tp and dp: 2x4), the gradients arrive sharded (propagation
// carries the constraint into the gradient function, whose dp reduction
// becomes a reduce_scatter), the parameter is sliced locally for the
// update (all_slice, free) and each updated parameter is all_gathered.
// PART-LABEL: func.func @loss_step(
// PART-SAME:    %arg4: tensor<2x4xf32> {par.global_type = tensor<8x4xf32>, par.init = #par.init<zeros>, par.sharding = #par.sharding<@mesh, [{"tp", "dp"}, {}]>}
// PART-SAME:    %arg5: tensor<2xf32> {par.global_type = tensor<4xf32>, par.init = #par.init<zeros>, par.sharding = #par.sharding<@mesh, [{"dp"}]>}
// PART-SAME:    %arg6: tensor<f32>
// PART:         call @loss_grad({{.*}}) -> (tensor<f32>, tensor<2x4xf32>, tensor<2xf32>, tensor<f32>)
// PART:         par.all_slice %arg1 on @mesh axes = ["dp"] dim = 0 : tensor<4x4xf32> -> tensor<2x4xf32>
// PART:         par.all_slice %arg2 on @mesh axes = ["dp"] dim = 0 : tensor<4xf32> -> tensor<2xf32>
// PART:         %[[W:.*]] = par.all_gather %{{.*}} on @mesh axes = ["dp"] dim = 0 : tensor<2x4xf32> -> tensor<4x4xf32>
// PART-NEXT:    %[[B:.*]] = par.all_gather %{{.*}} on @mesh axes = ["dp"] dim = 0 : tensor<2xf32> -> tensor<4xf32>
// PART-NEXT:    return %{{.*}}, %[[W]], %[[B]],

// COMM-LABEL: par-comm-report: @loss_grad
// COMM-DAG:     par.reduce_scatter axes=["dp"] n=2 f32 tensor<4x4xf32>: 32 bytes
// COMM-DAG:     par.reduce_scatter axes=["dp"] n=2 f32 tensor<4xf32>: 8 bytes
// COMM:         total:
// COMM-LABEL: par-comm-report: @loss_step
// COMM-NEXT:    par.all_gather axes=["dp"] n=2 f32 tensor<2x4xf32>: 32 bytes
// COMM-NEXT:    par.all_gather axes=["dp"] n=2 f32 tensor<2xf32>: 8 bytes
// COMM-NEXT:    total: 2 collectives, 40 bytes per device

// Tests the report: AdamW's two state tensors per parameter, per rank.
// REPORT:      par-optimizer: @loss_step adamw zero=1 over ["dp"]
// REPORT-NEXT:   #1 tensor<8x4xf32> [{"tp"}, {}]: state [{"tp", "dp"}, {}], 64 bytes per rank (zero=0: 128)
// REPORT-NEXT:   #2 tensor<4xf32> [{}]: state [{"dp"}], 16 bytes per rank (zero=0: 32)
// REPORT-NEXT:   #3 tensor<f32> []: state [], 8 bytes per rank (zero=0: 8)
// REPORT-NEXT:   optimizer state per rank: 88 bytes (zero=0: 168, 1.91x less)
// REPORT-NEXT:   zero-sharded gradients per step and rank (ring): reduce_scatter 40 + all_gather 40 = 80 bytes, the all_reduce's 2(n-1)/n*S
// REPORT0:     par-optimizer: @loss_step adamw zero=0
// REPORT0-NEXT:  optimizer state per rank: 168 bytes (unannotated parameters counted as replicated)

// Tests that unscaling and clipping see the sharded gradients: the squared
// sums run on the local blocks (partial over dp, all_reduced: the norm is
// still global) and the clip factor scales the local blocks.
// CLIP:         %[[G:.*]]:4 = call @loss_grad
// CLIP-NEXT:    %[[GW:.*]] = par.sharding_constraint %[[G]]#1
// CLIP-NEXT:    %[[GB:.*]] = par.sharding_constraint %[[G]]#2
// CLIP:         linalg.generic {{.*}} iterator_types = ["reduction", "reduction"]} ins(%[[GW]] :
// CLIP:         linalg.generic {{.*}} iterator_types = ["reduction"]} ins(%[[GB]] :
// CLIPCOMM-LABEL: par-comm-report: @loss_step
// CLIPCOMM-NEXT:  par.all_reduce axes=["tp", "dp"] n=4 f32 tensor<f32>
// CLIPCOMM-NEXT:  par.all_reduce axes=["dp"] n=2 f32 tensor<f32>
// CLIPCOMM-NEXT:  par.all_gather axes=["dp"] n=2
// CLIPCOMM-NEXT:  par.all_gather axes=["dp"] n=2

// Tests zero-axes: the state goes over the axes given, less those the
// parameter is already split over (w is over tp: its state stays so).
// AXES-LABEL: func.func @loss_step(
// AXES-SAME:    %arg4: tensor<8x4xf32> {par.init = #par.init<zeros>, par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>},
// AXES-SAME:    %arg5: tensor<4xf32> {par.init = #par.init<zeros>, par.sharding = #par.sharding<@mesh, [{"tp"}]>},
// AXES:         call @loss_grad
// AXES-NEXT:    par.sharding_constraint %{{.*}}#2 <@mesh, [{"tp"}]> : tensor<4xf32>
// AXES-NEXT:    tensor.empty

// BADAXIS: error: 'func.func' op zero-axes: unknown mesh axis 'tq' (mesh @mesh has 'dp' 'tp')
// TWICE: error: 'func.func' op zero-axes: mesh axis 'dp' is listed twice
// NOZERO: zero-axes is given but zero=0 (set zero=1, 2 or 3 to shard the optimizer state)
// ZEROPIPE: zero must be 0, 1, 2 or 3 (got -1)
// A pipeline stage's update: its state split over dp (the parameter and
// its gradient sum pinned to the parameter's layout), the gradient sums
// constrained to the state's shard, the updated parameters back to theirs.
// PIPE-LABEL: func.func @loss_s0_update(
// PIPE-SAME:    %arg2: tensor<16x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}
// PIPE-SAME:    %arg4: tensor<16x16xf32> {par.init = #par.init<zeros>, par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// PIPE-SAME:    -> (tensor<16x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}, tensor<16x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}, tensor<16x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// PIPE-NEXT:    par.sharding_constraint %arg2 <@mesh, [{"dp"}, {}]>
// PIPE-NEXT:    par.sharding_constraint %arg3 <@mesh, [{"dp"}, {}]>
// PIPE:         %[[P0:.*]] = par.sharding_constraint %{{.*}}#0 <@mesh, [{}, {}]>
// PIPE:         return %[[P0]]

par.mesh @mesh ["dp"=2, "tp"=2]
func.func @loss(%x: tensor<4x8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
                %w: tensor<8x4xf32> {par.param, par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>},
                %b: tensor<4xf32> {par.param},
                // expected-remark @+1 {{zero=1: parameter #3 ('tensor<f32>') has no dimension that 2 devices divide: its optimizer state and update stay unsharded over the data-parallel axes}}
                %a: tensor<f32> {par.param}) -> tensor<f32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x4xf32>) outs(%z : tensor<4x4xf32>) -> tensor<4x4xf32>
  %el = tensor.empty() : tensor<f32>
  %zl = linalg.fill ins(%c0 : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> ()>, affine_map<(i, j) -> ()>],
                       iterator_types = ["reduction", "reduction"]}
      ins(%m, %b, %a : tensor<4x4xf32>, tensor<4xf32>, tensor<f32>) outs(%zl : tensor<f32>) {
    ^bb0(%mv: f32, %bv: f32, %av: f32, %acc: f32):
      %s = arith.addf %mv, %bv : f32
      %t = arith.mulf %s, %s : f32
      %u = arith.mulf %t, %av : f32
      %r = arith.addf %acc, %u : f32
      linalg.yield %r : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that without a data-parallel axis (the data is not split) zero=1
// changes nothing but says so.
// CHECK-LABEL: func.func @replicated_step(
// CHECK-SAME:    %arg2: tensor<4xf32> {par.init = #par.init<zeros>})
// CHECK-NOT:     par.sharding_constraint
// CHECK:         return
par.mesh @mesh ["dp"=2, "tp"=2]
// expected-remark @+1 {{zero=1 has no effect: no data argument splits its dim 0 over a mesh axis and zero-axes is empty (the optimizer state stays sharded like its parameter)}}
func.func @replicated(%x: tensor<4xf32>, %w: tensor<4xf32> {par.param}) -> tensor<f32> {
  %c0 = arith.constant 0.0 : f32
  %el = tensor.empty() : tensor<f32>
  %zl = linalg.fill ins(%c0 : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>, affine_map<(i) -> ()>],
                       iterator_types = ["reduction"]}
      ins(%x, %w : tensor<4xf32>, tensor<4xf32>) outs(%zl : tensor<f32>) {
    ^bb0(%xv: f32, %wv: f32, %acc: f32):
      %u = arith.mulf %xv, %wv : f32
      %r = arith.addf %acc, %u : f32
      linalg.yield %r : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}

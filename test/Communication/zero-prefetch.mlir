// RUN: par-opt %s --par-zero-prefetch -split-input-file | FileCheck %s
// RUN: par-opt %s --par-zero-prefetch -split-input-file | par-opt -split-input-file | FileCheck %s

// Tests the rule, one group ahead: layer 0's two gathers (one group: no
// work between them) start as early as their shards allow, above the
// embedding's work; layer 1's gather starts right after layer 0's last
// wait, layer 2's right after layer 1's; each allocation moves with its
// start, and each wait stays at the gather's place, right before the first
// use. An untagged gather stays blocking.
// CHECK-LABEL: func.func @layers(
// CHECK-SAME:    %[[X:[^:]*]]: memref<8xf32>, %[[W0:[^:]*]]: memref<4xf32>, %[[B0:[^:]*]]: memref<4xf32>, %[[W1:[^:]*]]: memref<4xf32>, %[[W2:[^:]*]]: memref<4xf32>
// CHECK-NEXT:    %[[G0:.*]] = memref.alloc() : memref<8xf32>
// CHECK-NEXT:    %[[S0:.*]] = par.buffer_all_gather_start %[[W0]], %[[G0]] on @mesh axes = ["dp"] dim = 0 {par.zero_gather = "forward"} : memref<4xf32>, memref<8xf32>
// CHECK-NEXT:    %[[GB:.*]] = memref.alloc() : memref<8xf32>
// CHECK-NEXT:    %[[SB:.*]] = par.buffer_all_gather_start %[[B0]], %[[GB]]
// CHECK-NEXT:    %[[E:.*]] = memref.alloc() : memref<8xf32>
// CHECK-NEXT:    linalg.generic {{.*}} ins(%[[X]] : memref<8xf32>) outs(%[[E]] : memref<8xf32>)
// CHECK:         par.buffer_wait %[[S0]] ins(%[[W0]] : memref<4xf32>) outs(%[[G0]] : memref<8xf32>)
// CHECK-NEXT:    par.buffer_wait %[[SB]] ins(%[[B0]] : memref<4xf32>) outs(%[[GB]] : memref<8xf32>)
// CHECK-NEXT:    %[[G1:.*]] = memref.alloc() : memref<8xf32>
// CHECK-NEXT:    %[[S1:.*]] = par.buffer_all_gather_start %[[W1]], %[[G1]]
// CHECK-NEXT:    %[[H0:.*]] = memref.alloc() : memref<8xf32>
// CHECK-NEXT:    linalg.generic {{.*}} ins(%[[E]], %[[G0]] : memref<8xf32>, memref<8xf32>) outs(%[[H0]] : memref<8xf32>)
// CHECK:         linalg.generic {{.*}} ins(%[[H0]], %[[GB]] : memref<8xf32>, memref<8xf32>) outs(%[[H0]] : memref<8xf32>)
// CHECK:         par.buffer_wait %[[S1]] ins(%[[W1]] : memref<4xf32>) outs(%[[G1]] : memref<8xf32>)
// CHECK-NEXT:    %[[G2:.*]] = memref.alloc() : memref<8xf32>
// CHECK-NEXT:    %[[S2:.*]] = par.buffer_all_gather_start %[[W2]], %[[G2]]
// CHECK-NEXT:    %[[H1:.*]] = memref.alloc() : memref<8xf32>
// CHECK-NEXT:    linalg.generic {{.*}} ins(%[[H0]], %[[G1]] : memref<8xf32>, memref<8xf32>) outs(%[[H1]] : memref<8xf32>)
// CHECK:         par.buffer_all_gather %[[W2]], %{{.*}} on @mesh axes = ["dp"] dim = 0 : memref<4xf32>, memref<8xf32>
// CHECK-NEXT:    par.buffer_wait %[[S2]] ins(%[[W2]] : memref<4xf32>) outs(%[[G2]] : memref<8xf32>)
// CHECK-NEXT:    linalg.generic {{.*}} ins(%[[H1]], %[[G2]] : memref<8xf32>, memref<8xf32>)
#id = affine_map<(i) -> (i)>
par.mesh @mesh ["dp"=2]
func.func @layers(%x: memref<8xf32>, %w0: memref<4xf32>, %b0: memref<4xf32>, %w1: memref<4xf32>, %w2: memref<4xf32>, %y: memref<8xf32>) {
  %e = memref.alloc() : memref<8xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%x : memref<8xf32>) outs(%e : memref<8xf32>) {
  ^bb0(%i: f32, %o: f32):
    linalg.yield %i : f32
  }
  %g0 = memref.alloc() : memref<8xf32>
  par.buffer_all_gather %w0, %g0 on @mesh axes = ["dp"] dim = 0 {par.zero_gather = "forward"} : memref<4xf32>, memref<8xf32>
  %gb = memref.alloc() : memref<8xf32>
  par.buffer_all_gather %b0, %gb on @mesh axes = ["dp"] dim = 0 {par.zero_gather = "forward"} : memref<4xf32>, memref<8xf32>
  %h0 = memref.alloc() : memref<8xf32>
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]} ins(%e, %g0 : memref<8xf32>, memref<8xf32>) outs(%h0 : memref<8xf32>) {
  ^bb0(%i: f32, %w: f32, %o: f32):
    %m = arith.mulf %i, %w : f32
    linalg.yield %m : f32
  }
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]} ins(%h0, %gb : memref<8xf32>, memref<8xf32>) outs(%h0 : memref<8xf32>) {
  ^bb0(%i: f32, %w: f32, %o: f32):
    %m = arith.addf %i, %w : f32
    linalg.yield %m : f32
  }
  %g1 = memref.alloc() : memref<8xf32>
  par.buffer_all_gather %w1, %g1 on @mesh axes = ["dp"] dim = 0 {par.zero_gather = "forward"} : memref<4xf32>, memref<8xf32>
  %h1 = memref.alloc() : memref<8xf32>
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]} ins(%h0, %g1 : memref<8xf32>, memref<8xf32>) outs(%h1 : memref<8xf32>) {
  ^bb0(%i: f32, %w: f32, %o: f32):
    %m = arith.mulf %i, %w : f32
    linalg.yield %m : f32
  }
  %u = memref.alloc() : memref<8xf32>
  par.buffer_all_gather %w2, %u on @mesh axes = ["dp"] dim = 0 : memref<4xf32>, memref<8xf32>
  %g2 = memref.alloc() : memref<8xf32>
  par.buffer_all_gather %w2, %g2 on @mesh axes = ["dp"] dim = 0 {par.zero_gather = "backward"} : memref<4xf32>, memref<8xf32>
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]} ins(%h1, %g2 : memref<8xf32>, memref<8xf32>) outs(%y : memref<8xf32>) {
  ^bb0(%i: f32, %w: f32, %o: f32):
    %m = arith.mulf %i, %w : f32
    linalg.yield %m : f32
  }
  return
}

// -----

// Tests that a start stays below the op that writes its shard (mixed
// precision's cast on the shard) and below a call (unknown effects), and
// that a gather into a 2-d buffer along dim 1 keeps its dim.
// CHECK-LABEL: func.func @bounded(
// CHECK:         linalg.generic {{.*}} ins(%{{.*}} : memref<2x4xf32>) outs(%[[S:.*]] : memref<2x4xf16>)
// CHECK:           arith.truncf
// CHECK-NEXT:      linalg.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[G:.*]] = memref.alloc() : memref<2x8xf16>
// CHECK-NEXT:    %[[H:.*]] = par.buffer_all_gather_start %[[S]], %[[G]] on @mesh axes = ["dp"] dim = 1 {par.zero_gather = "forward"} : memref<2x4xf16>, memref<2x8xf16>
// CHECK-NEXT:    linalg.generic
// CHECK:         par.buffer_wait %[[H]]
// CHECK:         call @opaque
// CHECK-NEXT:    %[[G2:.*]] = memref.alloc() : memref<2x8xf16>
// CHECK-NEXT:    %[[H2:.*]] = par.buffer_all_gather_start
// CHECK-NEXT:    linalg.generic
// CHECK:         par.buffer_wait %[[H2]]
#id = affine_map<(i, j) -> (i, j)>
par.mesh @mesh ["dp"=2]
func.func private @opaque(memref<8xf32>)
func.func @bounded(%x: memref<8xf32>, %m: memref<2x4xf32>, %y: memref<8xf32>) {
  %s = memref.alloc() : memref<2x4xf16>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%m : memref<2x4xf32>) outs(%s : memref<2x4xf16>) {
  ^bb0(%i: f32, %o: f16):
    %t = arith.truncf %i : f32 to f16
    linalg.yield %t : f16
  }
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]} ins(%x : memref<8xf32>) outs(%y : memref<8xf32>) {
  ^bb0(%i: f32, %o: f32):
    linalg.yield %i : f32
  }
  %g = memref.alloc() : memref<2x8xf16>
  par.buffer_all_gather %s, %g on @mesh axes = ["dp"] dim = 1 {par.zero_gather = "forward"} : memref<2x4xf16>, memref<2x8xf16>
  call @opaque(%y) : (memref<8xf32>) -> ()
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]} ins(%x : memref<8xf32>) outs(%y : memref<8xf32>) {
  ^bb0(%i: f32, %o: f32):
    linalg.yield %i : f32
  }
  %g2 = memref.alloc() : memref<2x8xf16>
  par.buffer_all_gather %s, %g2 on @mesh axes = ["dp"] dim = 1 {par.zero_gather = "backward"} : memref<2x4xf16>, memref<2x8xf16>
  return
}

// -----

// Tests the gathers that stay blocking: one with nothing but allocations
// before it (nothing to overlap), and one whose output is read before the
// gather (the start would race with that read).
// CHECK-LABEL: func.func @blocking(
// CHECK-NOT:     par.buffer_all_gather_start
// CHECK:         par.buffer_all_gather %{{.*}}, %{{.*}} on @mesh axes = ["dp"] dim = 0 {par.zero_gather = "forward"}
// CHECK:         memref.copy
// CHECK:         par.buffer_all_gather %{{.*}}, %{{.*}} on @mesh axes = ["dp"] dim = 0 {par.zero_gather = "backward"}
// CHECK-NOT:     par.buffer_all_gather_start
par.mesh @mesh ["dp"=2]
func.func @blocking(%w: memref<4xf32>, %y: memref<8xf32>) {
  %g = memref.alloc() : memref<8xf32>
  par.buffer_all_gather %w, %g on @mesh axes = ["dp"] dim = 0 {par.zero_gather = "forward"} : memref<4xf32>, memref<8xf32>
  memref.copy %g, %y : memref<8xf32> to memref<8xf32>
  %g2 = memref.alloc() : memref<8xf32>
  memref.copy %g2, %y : memref<8xf32> to memref<8xf32>
  par.buffer_all_gather %w, %g2 on @mesh axes = ["dp"] dim = 0 {par.zero_gather = "backward"} : memref<4xf32>, memref<8xf32>
  memref.copy %g2, %y : memref<8xf32> to memref<8xf32>
  return
}

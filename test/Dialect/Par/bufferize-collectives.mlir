// RUN: par-opt %s --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" -split-input-file -verify-diagnostics | FileCheck %s --implicit-check-not=par_rt_k

// Tests that bufferization only bufferizes: each collective becomes its
// buffer form, reading the input's buffer and writing a fresh contiguous
// one, with no runtime call yet (Conversion/ParToRuntime makes those).

// CHECK-LABEL: func.func @collectives(
// CHECK-SAME:    %[[A:.*]]: memref<8x16xf32>
// CHECK:         %[[R:.*]] = memref.alloc() : memref<8x16xf32>
// CHECK:         par.buffer_all_reduce %[[A]], %[[R]] on @mesh axes = ["x", "y"] kind = max : memref<8x16xf32>, memref<8x16xf32>
// CHECK:         %[[G:.*]] = memref.alloc() : memref<8x64xf32>
// CHECK:         par.buffer_all_gather %[[A]], %[[G]] on @mesh axes = ["y"] dim = 1 : memref<8x16xf32>, memref<8x64xf32>
// CHECK:         %[[S:.*]] = memref.alloc() : memref<8x4xf32>
// CHECK:         par.buffer_reduce_scatter %[[A]], %[[S]] on @mesh axes = ["y"] dim = 1 kind = sum : memref<8x16xf32>, memref<8x4xf32>
// CHECK:         %[[T:.*]] = memref.alloc() : memref<32x4xf32>
// CHECK:         par.buffer_all_to_all %[[A]], %[[T]] on @mesh axes = ["y"] split_dim = 1 concat_dim = 0 : memref<8x16xf32>, memref<32x4xf32>
// CHECK:         %[[L:.*]] = memref.alloc() : memref<8x4xf32>
// CHECK:         par.buffer_all_slice %[[A]], %[[L]] on @mesh axes = ["y"] dim = 1 : memref<8x16xf32>, memref<8x4xf32>
// CHECK:         %[[B:.*]] = memref.alloc() : memref<8x16xf32>
// CHECK:         par.buffer_broadcast %[[A]], %[[B]] on @mesh axes = ["x"] root = [1] : memref<8x16xf32>, memref<8x16xf32>
// CHECK:         par.buffer_send %[[A]] on @mesh axes = ["y"] dest = [3] {tag = 7 : i64} : memref<8x16xf32>
// CHECK:         %[[V:.*]] = memref.alloc() : memref<8x16xf32>
// CHECK:         par.buffer_recv %[[V]] on @mesh axes = ["y"] source = [1] : memref<8x16xf32>
// CHECK:         return %[[R]], %[[G]], %[[S]], %[[T]], %[[L]], %[[B]], %[[V]]
par.mesh @mesh ["x"=2, "y"=4]
func.func @collectives(%a: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x64xf32>, tensor<8x4xf32>, tensor<32x4xf32>, tensor<8x4xf32>, tensor<8x16xf32>, tensor<8x16xf32>) {
  %0 = par.all_reduce %a on @mesh axes = ["x", "y"] kind = max : tensor<8x16xf32>
  %1 = par.all_gather %a on @mesh axes = ["y"] dim = 1 : tensor<8x16xf32> -> tensor<8x64xf32>
  %2 = par.reduce_scatter %a on @mesh axes = ["y"] dim = 1 kind = sum : tensor<8x16xf32> -> tensor<8x4xf32>
  %3 = par.all_to_all %a on @mesh axes = ["y"] split_dim = 1 concat_dim = 0 : tensor<8x16xf32> -> tensor<32x4xf32>
  %4 = par.all_slice %a on @mesh axes = ["y"] dim = 1 : tensor<8x16xf32> -> tensor<8x4xf32>
  %5 = par.broadcast %a on @mesh axes = ["x"] root = [1] : tensor<8x16xf32>
  par.send %a on @mesh axes = ["y"] dest = [3] {tag = 7} : tensor<8x16xf32>
  %6 = par.recv on @mesh axes = ["y"] source = [1] : tensor<8x16xf32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<8x16xf32>, tensor<8x64xf32>, tensor<8x4xf32>, tensor<32x4xf32>, tensor<8x4xf32>, tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

// Tests that a strided input is copied into a contiguous buffer first.
// CHECK-LABEL: func.func @strided(
// CHECK:         %[[SUB:.*]] = memref.subview
// CHECK:         %[[C:.*]] = memref.alloc() : memref<4x16xf32>
// CHECK:         memref.copy %[[SUB]], %[[C]]
// CHECK:         par.buffer_all_reduce %[[C]], %{{.*}} on @mesh
par.mesh @mesh ["x"=2, "y"=4]
func.func @strided(%a: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %s = tensor.extract_slice %a[2, 0] [4, 16] [1, 1] : tensor<8x16xf32> to tensor<4x16xf32>
  %0 = par.all_reduce %s on @mesh axes = ["y"] kind = sum : tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Tests that a dynamic shape is refused with a clear error.
par.mesh @mesh ["x"=2, "y"=4]
func.func @dynamic(%a: tensor<?x16xf32>) -> tensor<?x16xf32> {
  // expected-error @below {{needs static shapes to bufferize}}
  // expected-error @below {{failed to bufferize op}}
  %0 = par.all_reduce %a on @mesh axes = ["y"] kind = sum : tensor<?x16xf32>
  return %0 : tensor<?x16xf32>
}

// -----

// Tests that par.recompute_barrier bufferizes to its operand's buffer (an
// alias: no allocation or copy; the one allocation is the generic's
// output) and leaves nothing behind.
// CHECK-LABEL: func.func @recompute_barrier(
// CHECK-SAME:    %[[X:.*]]: memref<8x16xf32>
// CHECK-NOT:     par.recompute_barrier
// CHECK:         %[[OUT:.*]] = memref.alloc() {{.*}} : memref<8x16xf32>
// CHECK-NOT:     memref.alloc
// CHECK-NOT:     memref.copy
// CHECK:         linalg.generic {{.*}} ins(%[[X]] : memref<8x16xf32>) outs(%[[OUT]] : memref<8x16xf32>)
func.func @recompute_barrier(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %b = par.recompute_barrier %x : tensor<8x16xf32>
  %e = tensor.empty() : tensor<8x16xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%b : tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%v: f32, %o: f32):
    %t = math.tanh %v : f32
    linalg.yield %t : f32
  } -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

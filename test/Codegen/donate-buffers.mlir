// RUN: par-opt %s --par-donate-buffers -split-input-file | FileCheck %s
// RUN: par-opt %s --par-donate-buffers --par-mark-entry-points --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" --par-return-donated --par-return-donated="restore=true" -split-input-file | FileCheck %s --check-prefix=BUF
// RUN: par-opt %s --par-donate-buffers --par-mark-entry-points --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" --par-return-donated -split-input-file | FileCheck %s --check-prefix=DROP

// Between the two runs the donated results are out of the function (the
// deallocation passes run there), and back after the second.
// DROP-LABEL: func.func @step(
// DROP-SAME:    -> memref<f32>
// DROP-SAME:    par.donated_dropped = array<i64: 1, 0, 2, 1>
// DROP:         return %{{.*}} : memref<f32>

// A train step's fed-back results are donated; the update generic (init
// not read, identity map) writes into its arguments, so bufferization
// computes it in place and returns the arguments. The loss (result 0) is
// not fed back; result 2 feeds two arguments and is donated to the first.
// CHECK-LABEL: func.func @step(
// CHECK-SAME:    %[[P:[a-z0-9]+]]: tensor<8xf32>, %[[M:[a-z0-9]+]]: tensor<8xf32>, %[[G:[a-z0-9]+]]: tensor<8xf32>, %[[M2:[a-z0-9]+]]: tensor<8xf32>)
// CHECK-SAME:    par.donated = array<i64: 1, 0, 2, 1>
// CHECK:         linalg.generic
// CHECK-SAME:      ins(%[[P]], %[[G]], %[[M]] : {{.*}}) outs(%[[P]], %[[M]] : {{.*}})
// BUF-LABEL: func.func @step(
// BUF-SAME:    %[[P:[a-z0-9]+]]: memref<8xf32>, %[[M:[a-z0-9]+]]: memref<8xf32>,
// BUF-NOT:     memref.alloc() : memref<8xf32>
// BUF:         linalg.generic
// BUF-SAME:      outs(%[[P]], %[[M]] : memref<8xf32>, memref<8xf32>)
// BUF-NOT:     memref.copy
// BUF:         return %{{.*}}, %[[P]], %[[M]] :
// BUF-NOT:     par.donated
#m = affine_map<(d0) -> (d0)>
func.func @step(%p: tensor<8xf32>, %m: tensor<8xf32>, %g: tensor<8xf32>, %m2: tensor<8xf32>)
    -> (tensor<f32>, tensor<8xf32>, tensor<8xf32>) attributes {par.feedback = array<i64: 1, 0, 2, 1, 2, 3>} {
  %s = arith.constant dense<0.0> : tensor<f32>
  %e = tensor.empty() : tensor<8xf32>
  %r:2 = linalg.generic {indexing_maps = [#m, #m, #m, #m, #m], iterator_types = ["parallel"]}
      ins(%p, %g, %m : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) outs(%e, %e : tensor<8xf32>, tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32, %o2: f32):
    %n = arith.subf %a, %b : f32
    %k = arith.addf %c, %b : f32
    linalg.yield %n, %k : f32, f32
  } -> (tensor<8xf32>, tensor<8xf32>)
  return %s, %r#0, %r#1 : tensor<f32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// A stage update's positions (P = 1 parameter: result 0 for arg 0, result
// 1 for state arg 2; the gradient, arg 1, is not donated). Result 1 is the
// old parameter: bufferization computes the new one aside (the old is
// still returned), and the return copies the old parameter aside before
// writing the new one over it, then into the state.
// CHECK-LABEL: func.func @s0_update(
// CHECK-SAME:    par.donated = array<i64: 0, 0, 1, 2>
// BUF-LABEL: func.func @s0_update(
// BUF-SAME:    %[[P:[a-z0-9]+]]: memref<4xf32>, %[[G:[a-z0-9]+]]: memref<4xf32>, %[[V:[a-z0-9]+]]: memref<4xf32>)
// BUF:         %[[NEW:.*]] = memref.alloc() {{.*}}: memref<4xf32>
// BUF:         linalg.generic
// BUF-SAME:      outs(%[[NEW]] : memref<4xf32>)
// BUF:         %[[ASIDE:.*]] = memref.alloc() : memref<4xf32>
// BUF:         memref.copy %[[P]], %[[ASIDE]]
// BUF:         memref.copy %[[NEW]], %[[P]]
// BUF:         memref.copy %[[ASIDE]], %[[V]]
// BUF:         return %[[P]], %[[V]] :
// The module's par.pipeline names the update, but no call does: its
// results leave it too.
// DROP-LABEL: func.func @s0_update(
// DROP-SAME:    par.donated_dropped = array<i64: 0, 0, 1, 2>
// DROP:         return{{$}}
#m1 = affine_map<(d0) -> (d0)>
module attributes {par.pipeline = #par.pipeline<func = @s0, stages = [#par.stage<forward = @s0, loss = @s0, update = @s0_update>]>} {
  func.func @s0(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
  func.func @s0_update(%p: tensor<4xf32>, %g: tensor<4xf32>, %v: tensor<4xf32>)
      -> (tensor<4xf32>, tensor<4xf32>) attributes {par.stage = 0 : i64, par.stage_args = array<i64: 0>} {
    %e = tensor.empty() : tensor<4xf32>
    %n = linalg.generic {indexing_maps = [#m1, #m1, #m1], iterator_types = ["parallel"]}
        ins(%p, %g : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %d = arith.subf %a, %b : f32
      linalg.yield %d : f32
    } -> tensor<4xf32>
    return %n, %p : tensor<4xf32>, tensor<4xf32>
  }
}

// -----

// A generic that reads its init (an accumulation) keeps it: the result is
// donated and copied into the argument at the return.
// CHECK-LABEL: func.func @accumulates(
// CHECK-SAME:    par.donated = array<i64: 0, 0>
// CHECK:         outs(%{{.*}} : tensor<4xf32>)
// BUF-LABEL: func.func @accumulates(
// BUF-SAME:    %[[P:[a-z0-9]+]]: memref<4xf32>, %[[X:[a-z0-9]+]]: memref<4xf32>)
// BUF:         linalg.generic
// BUF:         memref.copy %{{.*}}, %[[P]]
// BUF:         return %[[P]] :
#m2 = affine_map<(d0) -> (d0)>
func.func @accumulates(%p: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<4xf32>
    attributes {par.feedback = array<i64: 0, 0>} {
  %c = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %f = linalg.fill ins(%c : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %n = linalg.generic {indexing_maps = [#m2, #m2], iterator_types = ["parallel"]}
      ins(%x : tensor<4xf32>) outs(%f : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %d = arith.addf %a, %o : f32
    linalg.yield %d : f32
  } -> tensor<4xf32>
  return %n : tensor<4xf32>
}

// -----

// A function with par.donated keeps its pairs (par-compile's second run,
// after elementwise fusion gave the generic a fresh init).
// CHECK-LABEL: func.func @again(
// CHECK-SAME:    %[[P:[a-z0-9]+]]: tensor<4xf32>
// CHECK-SAME:    par.donated = array<i64: 0, 0>
// CHECK:         outs(%[[P]] : tensor<4xf32>)
#m3 = affine_map<(d0) -> (d0)>
func.func @again(%p: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<4xf32>
    attributes {par.donated = array<i64: 0, 0>} {
  %e = tensor.empty() : tensor<4xf32>
  %n = linalg.generic {indexing_maps = [#m3, #m3, #m3], iterator_types = ["parallel"]}
      ins(%p, %x : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.addf %a, %b : f32
    linalg.yield %d : f32
  } -> tensor<4xf32>
  return %n : tensor<4xf32>
}

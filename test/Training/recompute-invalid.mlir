// RUN: par-opt %s --par-autodiff "--par-recompute=policy=full" -split-input-file -verify-diagnostics -o /dev/null
// RUN: not par-opt %s --par-autodiff --par-recompute=policy=some -o /dev/null 2>&1 | FileCheck %s --check-prefix=POLICY
// POLICY: unknown recompute policy 'some' (expected none, selective or full)
// RUN: not par-opt %s --par-autodiff "--par-recompute=policy=full layers=0,2-1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=RANGE
// RANGE: bad recompute layers entry '2-1' (expected a layer index N or a range A-B, A <= B)
// RUN: not par-opt %s --par-autodiff "--par-recompute=policy=full layers=first" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NAME
// NAME: bad recompute layers entry 'first' (expected a layer index N or a range A-B, A <= B)
// RUN: not par-opt %s --par-autodiff "--par-recompute=policy=full layers=1-3" -split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: recompute layer 3 does not exist: the gradient functions have 0 layer(s), numbered from 0
// MISSING: recompute layer 3 does not exist: the gradient functions have 2 layer(s), numbered from 0
// par-compile refuses the same values, and recomputation without a train
// step, with a non-zero exit.
// RUN: not par-compile %s --options="optimizer=sgd recompute=some" -o %t 2>&1 | FileCheck %s --check-prefix=POLICY
// RUN: not par-compile %s --options="optimizer=sgd recompute=full recompute-layers=x" -o %t 2>&1 | FileCheck %s --check-prefix=COMPILE-LAYERS
// COMPILE-LAYERS: bad recompute layers entry 'x'
// RUN: not par-compile %s --options="recompute=selective" -o %t 2>&1 | FileCheck %s --check-prefix=NOTRAIN
// NOTRAIN: recompute=selective needs a train step (optimizer=sgd, momentum or adamw): it changes what the backward recomputes

// Tests that a program without residual blocks (nothing for full to
// recompute) is left as it is, with a warning.
#id = affine_map<(i, j) -> (i, j)>
// expected-warning @+1 {{recompute=full found nothing to recompute (0 layers, 0 attention cores)}}
func.func @flat(%x: tensor<4x8xf32>, %w: tensor<8x8xf32> {par.param}) -> tensor<f32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %h = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%h : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.tanh %a : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %e0 = tensor.empty() : tensor<f32>
  %z0 = linalg.fill ins(%c0 : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [#id, affine_map<(i, j) -> ()>], iterator_types = ["reduction", "reduction"]} ins(%g : tensor<4x8xf32>) outs(%z0 : tensor<f32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %o, %a : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that residual sums without attention (an MLP) make one layer each,
// so that layers=1-3 on two of them names a missing one (above).
#id2 = affine_map<(i, j) -> (i, j)>
func.func @mlp(%x: tensor<4x8xf32>, %w1: tensor<8x8xf32> {par.param}, %w2: tensor<8x8xf32> {par.param}) -> tensor<f32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %h1 = linalg.matmul ins(%x, %w1 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %r1 = linalg.add ins(%x, %h1 : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %h2 = linalg.matmul ins(%r1, %w2 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %r2 = linalg.add ins(%r1, %h2 : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %e0 = tensor.empty() : tensor<f32>
  %z0 = linalg.fill ins(%c0 : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [#id2, affine_map<(i, j) -> ()>], iterator_types = ["reduction", "reduction"]} ins(%r2 : tensor<4x8xf32>) outs(%z0 : tensor<f32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %o, %a : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}

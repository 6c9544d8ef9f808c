// RUN: par-opt %s --par-optimizer -split-input-file -verify-diagnostics
// RUN: not par-opt %s --par-optimizer=optimizer=lion 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: unknown optimizer 'lion' (expected sgd, momentum or adamw)

// Tests that a train step needs the gradient function first.
// expected-error @+1 {{has parameters but no gradient function recorded (run par-autodiff first)}}
func.func @loss(%w: tensor<4xf32> {par.param}) -> tensor<f32> {
  %c = arith.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}

// -----

// Tests that the gradient is found by the par.grad link par-autodiff
// records, not by its name: an `other_grad` nothing links to is not it.
// expected-error @+1 {{has parameters but no gradient function recorded (run par-autodiff first)}}
func.func @other(%w: tensor<4xf32> {par.param}) -> tensor<f32> {
  %c = arith.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}
func.func @other_grad(%w: tensor<4xf32>) -> (tensor<f32>, tensor<4xf32>) {
  %c = arith.constant dense<0.0> : tensor<f32>
  return %c, %w : tensor<f32>, tensor<4xf32>
}
// RUN: not par-opt %s --par-optimizer=schedule=linear 2>&1 | FileCheck %s --check-prefix=SCHED
// SCHED: unknown schedule 'linear' (expected constant or cosine)
// RUN: not par-opt %s "--par-optimizer=schedule=cosine warmup-steps=10 total-steps=10" 2>&1 | FileCheck %s --check-prefix=STEPS
// STEPS: the cosine schedule needs total-steps > warmup-steps >= 0 (got 10 and 10)
// RUN: not par-opt %s "--par-optimizer=micro-batches=0" 2>&1 | FileCheck %s --check-prefix=MB0
// MB0: micro-batches must be >= 1 (got 0)
// RUN: not par-opt %s "--par-optimizer=zero=4" 2>&1 | FileCheck %s --check-prefix=ZERO4
// ZERO4: zero must be 0, 1, 2 or 3 (got 4): the ZeRO stages shard over the data-parallel axes the optimizer state (1), the gradients too (2) and the parameters too (3)
// RUN: not par-opt %S/Inputs/scalar-data.mlir --par-autodiff "--par-optimizer=micro-batches=2" 2>&1 | FileCheck %s --check-prefix=MBSCALAR
// MBSCALAR: scalar-data.mlir:3:1: error: 'func.func' op cannot accumulate micro-batches: data argument #0 ('tensor<f32>') has no static batch dim 0 to stack them along

// RUN: par-opt %s --par-loss-scale -split-input-file -verify-diagnostics
// Policy options out of range: errors on the module naming the option's
// rule and the value given (#par.loss_scale's verifier).
// RUN: not par-opt %S/Inputs/loss-matmul.mlir --par-loss-scale=init-scale=0 2>&1 | FileCheck %s --check-prefix=INIT
// INIT: error: par-loss-scale: loss scale: init must be positive and finite, got 0.000000e+00
// RUN: not par-opt %S/Inputs/loss-matmul.mlir --par-loss-scale=init-scale=-8 2>&1 | FileCheck %s --check-prefix=NEG
// NEG: error: par-loss-scale: loss scale: init must be positive and finite, got -8.000000e+00
// RUN: not par-opt %S/Inputs/loss-matmul.mlir --par-loss-scale=growth-factor=1 2>&1 | FileCheck %s --check-prefix=GROWTH
// GROWTH: error: par-loss-scale: loss scale: growth must be > 1, got 1.000000e+00
// RUN: not par-opt %S/Inputs/loss-matmul.mlir --par-loss-scale=backoff-factor=1.5 2>&1 | FileCheck %s --check-prefix=BACKOFF
// BACKOFF: error: par-loss-scale: loss scale: backoff must be in (0, 1), got 1.500000e+00
// RUN: not par-opt %S/Inputs/loss-matmul.mlir --par-loss-scale=backoff-factor=0 2>&1 | FileCheck %s --check-prefix=BACKOFF0
// BACKOFF0: error: par-loss-scale: loss scale: backoff must be in (0, 1), got 0.000000e+00
// RUN: not par-opt %S/Inputs/loss-matmul.mlir --par-loss-scale=hysteresis=0 2>&1 | FileCheck %s --check-prefix=HYST
// HYST: error: par-loss-scale: loss scale: hysteresis must be >= 1, got 0
// RUN: not par-opt %S/Inputs/loss-matmul.mlir --par-loss-scale=growth-interval=0 2>&1 | FileCheck %s --check-prefix=INTERVAL
// INTERVAL: error: par-loss-scale: loss scale: interval must be >= 1, got 0
// RUN: not par-opt %S/Inputs/loss-matmul.mlir "--par-loss-scale=init-scale=4 min-scale=8" 2>&1 | FileCheck %s --check-prefix=MIN
// MIN: error: par-loss-scale: loss scale: min must be in (0, init], got 8.000000e+00
// RUN: not par-opt %S/Inputs/loss-matmul.mlir --par-loss-scale=policy=adaptive 2>&1 | FileCheck %s --check-prefix=POLICY
// POLICY: error: par-loss-scale: unknown policy 'adaptive' (expected static or dynamic; par-compile's loss-scale= also takes none and auto)
// The same through par-compile's options.
// RUN: not par-compile %S/Inputs/loss-matmul.mlir --options="optimizer=adamw precision=f16 backoff-factor=1.5" -o %t 2>&1 | FileCheck %s --check-prefix=BACKOFF
// Running the pass twice: the second run finds the first one's argument.
// RUN: not par-opt %S/Inputs/loss-matmul.mlir --par-loss-scale --par-loss-scale 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: loss-matmul.mlir:2:1: error: 'func.func' op already has a loss scale (argument #2): par-loss-scale runs once
// A module with no parameters has no loss to scale.
// RUN: echo "func.func @f(%%x: tensor<f32>) -> tensor<f32> { return %%x : tensor<f32> }" | not par-opt --par-loss-scale 2>&1 | FileCheck %s --check-prefix=NOPARAM
// NOPARAM: error: par-loss-scale: no function has arguments marked par.param (a forward + loss to scale)

// Tests that a function that already has a loss-scale argument is not
// scaled again.
// expected-error @+1 {{'func.func' op already has a loss scale (argument #1): par-loss-scale runs once}}
func.func @again(%w: tensor<4xf32> {par.param},
                 %s: tensor<f32> {par.loss_scale = #par.loss_scale<kind = static, init = 8.0, growth = 2.0, backoff = 0.5, interval = 10, hysteresis = 1, min = 1.0>}) -> tensor<f32> {
  %c = arith.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}

// -----

// Tests that only a scalar floating-point loss can be scaled.
// expected-error @+1 {{'func.func' op must return one scalar floating-point loss to be scaled}}
func.func @vector_loss(%w: tensor<4xf32> {par.param}) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}

// -----

// expected-error @+1 {{'func.func' op must return one scalar floating-point loss to be scaled}}
func.func @two_results(%w: tensor<4xf32> {par.param}) -> (tensor<f32>, tensor<f32>) {
  %c = arith.constant dense<0.0> : tensor<f32>
  return %c, %c : tensor<f32>, tensor<f32>
}

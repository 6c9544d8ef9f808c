// RUN: not par-opt %s --par-normalize-torch --par-autodiff 2>&1 | FileCheck %s

// Tests that an op par cannot differentiate is reported at torch-mlir's
// location, the call sites of the user's model (model.py:12 called from
// train.py:40), kept whole in the message.
// CHECK: model.py:12:8:
// CHECK-SAME: error: 'linalg.generic' op has a body op par-autodiff cannot differentiate: 'math.sin'
// CHECK-NEXT: train.py:40:4: note: called from
func.func @f(%x: tensor<4xf32> {par.param}) -> tensor<f32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = math.sin %in : f32
    linalg.yield %v : f32
  } -> tensor<4xf32> loc(callsite("model.py":12:8 at "train.py":40:4))
  %e0 = tensor.empty() : tensor<f32>
  %f0 = linalg.fill ins(%c0 : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]} ins(%s : tensor<4xf32>) outs(%f0 : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %in, %out : f32
    linalg.yield %a : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}

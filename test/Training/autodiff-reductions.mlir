// RUN: par-opt %s --par-autodiff -split-input-file -verify-diagnostics | FileCheck %s

// Tests a maximum reduction's adjoint (torch's amax of softmax and
// log_softmax, once par-erase-dead-results has dropped the argmax): the
// input's adjoint reads the final maximum as the combiner's accumulator,
// so `max(x, y) == x` selects dy exactly where x attains the maximum.
// CHECK-LABEL: func.func @amax_grad(
// CHECK-SAME:    %[[X:.*]]: tensor<4x8xf32>)
// CHECK:         %[[M:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<4x8xf32>)
// CHECK:           arith.maximumf
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]} ins(%[[X]], %[[DY:.*]], %[[M]] : tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK-NEXT:    ^bb0(%[[IN:.*]]: f32, %[[D:.*]]: f32, %[[MAX:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK:           %[[AT:.*]] = arith.cmpf oge, %[[IN]], %[[MAX]] : f32
// CHECK:           %[[T:.*]] = arith.select %[[AT]]
// CHECK:           %[[G:.*]] = arith.mulf %[[D]], %[[T]] : f32
// CHECK:           arith.addf %[[ACC]], %[[G]] : f32
func.func @amax(%x: tensor<4x8xf32> {par.param}) -> tensor<f32> {
  %ninf = arith.constant 0xFF800000 : f32
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %m = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<4x8xf32>) outs(%m0 : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %mx = arith.maximumf %in, %out : f32
    linalg.yield %mx : f32
  } -> tensor<4xf32>
  %e0 = tensor.empty() : tensor<f32>
  %f0 = linalg.fill ins(%c0 : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]} ins(%m : tensor<4xf32>) outs(%f0 : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %in, %out : f32
    linalg.yield %a : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests the f64 LayerNorm variance torch-mlir emits (extf -> sum of
// squares in f64 -> truncf): each adjoint is typed like its operand, the
// f32 input's gradient accumulated in f64 and rounded once.
// CHECK-LABEL: func.func @var_grad(
// CHECK:         %[[G64:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<4x8xf64>) outs(%{{.*}} : tensor<4x8xf64>)
// CHECK:           arith.addf %{{.*}}, %{{.*}} : f64
// CHECK:         -> tensor<4x8xf64>
// CHECK:         %[[G32:.*]] = linalg.generic {{.*}} ins(%[[G64]] : tensor<4x8xf64>) outs(%{{.*}} : tensor<4x8xf32>)
// CHECK-NEXT:    ^bb0(%{{.*}}: f64, %{{.*}}: f32):
// CHECK-NEXT:      arith.truncf
// CHECK:         return %{{.*}}, %[[G32]] : tensor<f32>, tensor<4x8xf32>
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @var(%x: tensor<4x8xf32> {par.param}) -> tensor<f32> {
  %c0 = arith.constant 0.0 : f64
  %c0f = arith.constant 0.0 : f32
  %e64 = tensor.empty() : tensor<4x8xf64>
  %x64 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x8xf32>) outs(%e64 : tensor<4x8xf64>) {
  ^bb0(%in: f32, %out: f64):
    %v = arith.extf %in : f32 to f64
    linalg.yield %v : f64
  } -> tensor<4x8xf64>
  %er = tensor.empty() : tensor<4xf64>
  %f = linalg.fill ins(%c0 : f64) outs(%er : tensor<4xf64>) -> tensor<4xf64>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%x64 : tensor<4x8xf64>) outs(%f : tensor<4xf64>) {
  ^bb0(%in: f64, %out: f64):
    %m = arith.mulf %in, %in : f64
    %a = arith.addf %m, %out : f64
    linalg.yield %a : f64
  } -> tensor<4xf64>
  %e32 = tensor.empty() : tensor<4xf32>
  %t = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%s : tensor<4xf64>) outs(%e32 : tensor<4xf32>) {
  ^bb0(%in: f64, %out: f32):
    %v = arith.truncf %in : f64 to f32
    linalg.yield %v : f32
  } -> tensor<4xf32>
  %e0 = tensor.empty() : tensor<f32>
  %f0 = linalg.fill ins(%c0f : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]} ins(%t : tensor<4xf32>) outs(%f0 : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %in, %out : f32
    linalg.yield %a : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a maximum whose init depends on a parameter is an error
// naming the op.
func.func @active_init(%x: tensor<4x8xf32> {par.param}, %m0: tensor<4xf32> {par.param}) -> tensor<f32> {
  // expected-error @+1 {{takes the maximum or minimum with an init that depends on a parameter}}
  %m = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<4x8xf32>) outs(%m0 : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %mx = arith.maximumf %in, %out : f32
    linalg.yield %mx : f32
  } -> tensor<4xf32>
  %c0 = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<f32>
  %f0 = linalg.fill ins(%c0 : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]} ins(%m : tensor<4xf32>) outs(%f0 : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %in, %out : f32
    linalg.yield %a : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}

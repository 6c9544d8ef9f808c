// RUN: par-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(func.func(par-expand-fpowi))' | FileCheck %s --implicit-check-not=math.fpowi

// Tests that MSE's square (the exponent a constant outside the body, as
// torch-mlir writes it) becomes one multiplication, and that the generic
// keeps its par.stage.
// CHECK-LABEL: func.func @square
// CHECK:         linalg.generic
// CHECK-SAME:    attrs = {par.stage = 1 : i64}
// CHECK:         ^bb0(%[[X:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[SQ:.*]] = arith.mulf %[[X]], %[[X]] : f32
// CHECK-NEXT:      linalg.yield %[[SQ]] : f32
func.func @square(%x: tensor<8xf32>) -> tensor<8xf32> {
  %c2 = arith.constant 2 : i64
  %e = tensor.empty() : tensor<8xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>) attrs = {par.stage = 1 : i64} {
  ^bb0(%in: f32, %out: f32):
    %p = math.fpowi %in, %c2 : f32, i64
    linalg.yield %p : f32
  } -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// Tests that a cube (HF's gelu_new) is x*x*x by square-and-multiply, x^5
// is (x^2)^2 * x, x^0 is 1 and a negative exponent the reciprocal.
// CHECK-LABEL: func.func @powers
// CHECK-SAME:    (%[[X:.*]]: f32)
// CHECK-DAG:     %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK:         %[[X2:.*]] = arith.mulf %[[X]], %[[X]]
// CHECK:         %[[X3:.*]] = arith.mulf %[[X]], %[[X2]]
// CHECK:         %[[Y2:.*]] = arith.mulf %[[X]], %[[X]]
// CHECK:         %[[Y4:.*]] = arith.mulf %[[Y2]], %[[Y2]]
// CHECK:         %[[X5:.*]] = arith.mulf %[[X]], %[[Y4]]
// CHECK:         %[[Z2:.*]] = arith.mulf %[[X]], %[[X]]
// CHECK:         %[[INV:.*]] = arith.divf %[[ONE]], %[[Z2]]
// CHECK:         return %[[X3]], %[[X5]], %[[ONE]], %[[INV]]
func.func @powers(%x: f32) -> (f32, f32, f32, f32) {
  %c3 = arith.constant 3 : i64
  %c5 = arith.constant 5 : i32
  %c0 = arith.constant 0 : i64
  %cm2 = arith.constant -2 : i64
  %a = math.fpowi %x, %c3 : f32, i64
  %b = math.fpowi %x, %c5 : f32, i32
  %c = math.fpowi %x, %c0 : f32, i64
  %d = math.fpowi %x, %cm2 : f32, i64
  return %a, %b, %c, %d : f32, f32, f32, f32
}

// -----

// Tests that an exponent known only at run time is an error naming the op.
func.func @dynamic(%x: f32, %n: i64) -> f32 {
  // expected-error @+1 {{'math.fpowi' op has an exponent that is not a constant; par can only expand x ** n for a constant integer n into multiplications}}
  %p = math.fpowi %x, %n : f32, i64
  return %p : f32
}

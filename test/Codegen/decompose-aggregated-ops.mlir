// RUN: par-opt %s --par-decompose-aggregated-ops | FileCheck %s

// Tests that softmax becomes a max reduction, exp, a sum reduction and a
// division (generics), leaving no linalg.softmax.
// CHECK-LABEL: func.func @softmax
// CHECK-NOT:     linalg.softmax
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK:           arith.maxnumf
// CHECK:         math.exp
// CHECK:         arith.addf
// CHECK:         arith.divf
func.func @softmax(%a: tensor<4x8xf32>, %o: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = linalg.softmax dimension(1) ins(%a : tensor<4x8xf32>) outs(%o : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

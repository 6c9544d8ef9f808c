// RUN: par-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(par-decompose-pad))' | FileCheck %s

// Tests that HF's label shift (a pad with -100 at the end of the sequence)
// becomes a fill of the padded shape and an insert_slice at the low
// padding, with the pad's par.stage.
// CHECK-LABEL: func.func @shift_labels
// CHECK-SAME:    (%[[L:.*]]: tensor<4x31xi64>)
// CHECK:         %[[C:.*]] = arith.constant -100 : i64
// CHECK:         %[[E:.*]] = tensor.empty() {par.stage = 2 : i64} : tensor<4x32xi64>
// CHECK:         %[[F:.*]] = linalg.fill {par.stage = 2 : i64} ins(%[[C]] : i64) outs(%[[E]] : tensor<4x32xi64>)
// CHECK:         %[[I:.*]] = tensor.insert_slice %[[L]] into %[[F]][0, 0] [4, 31] [1, 1] {par.stage = 2 : i64}
// CHECK:         return %[[I]]
// CHECK-NOT:     tensor.pad
func.func @shift_labels(%l: tensor<4x31xi64>) -> tensor<4x32xi64> {
  %c = arith.constant -100 : i64
  %p = tensor.pad %l low[0, 0] high[0, 1] {
  ^bb0(%i: index, %j: index):
    tensor.yield %c : i64
  } {par.stage = 2 : i64} : tensor<4x31xi64> to tensor<4x32xi64>
  return %p : tensor<4x32xi64>
}

// -----

// Tests that a pad whose value depends on the position stays.
// CHECK-LABEL: func.func @position_dependent
// CHECK:         tensor.pad
func.func @position_dependent(%l: tensor<4x31xi64>) -> tensor<4x32xi64> {
  %p = tensor.pad %l low[0, 0] high[0, 1] {
  ^bb0(%i: index, %j: index):
    %v = arith.index_cast %j : index to i64
    tensor.yield %v : i64
  } : tensor<4x31xi64> to tensor<4x32xi64>
  return %p : tensor<4x32xi64>
}

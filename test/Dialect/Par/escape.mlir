// RUN: par-opt %s | par-opt | FileCheck %s
// RUN: par-opt %s -cse | FileCheck %s --check-prefix=CSE

// Tests that axis names with quotes and backslashes are printed escaped and
// parse back.
// CHECK: par.mesh @m ["a\22b"=2, "c\\d"=2]
// CHECK: #par.sharding<@m, [{"a\22b"}, {"c\\d"}]>
par.mesh @m ["a\"b"=2, "c\\d"=2]
func.func @f(%x: tensor<4x4xf32> {par.sharding = #par.sharding<@m, [{"a\"b"}, {"c\\d"}]>}) -> tensor<4x4xf32> {
  return %x : tensor<4x4xf32>
}

// Tests that a partial clause with no axes means the same as none (one
// canonical attribute), so CSE merges the two constraints.
// CSE-LABEL: func.func @empty_partial
// CSE-COUNT-1: par.sharding_constraint
// CSE-NOT: par.sharding_constraint
func.func @empty_partial(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = par.sharding_constraint %x <@m, [{}], partial max {}> : tensor<4xf32>
  %1 = par.sharding_constraint %x <@m, [{}]> : tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

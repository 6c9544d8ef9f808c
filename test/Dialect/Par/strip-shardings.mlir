// RUN: par-opt %s --par-strip-shardings -split-input-file -verify-diagnostics | FileCheck %s

// Tests that the reference program keeps the computation and loses every
// mesh, annotation and sharding attribute.
// CHECK-NOT:     par.
// CHECK-LABEL: func.func @f
// CHECK-SAME:    (%[[X:.*]]: tensor<8x16xf32>) -> tensor<8x16xf32>
// CHECK:         %[[E:.*]] = math.exp %[[X]] : tensor<8x16xf32>
// CHECK:         return %[[E]]
par.mesh @mesh ["dp"=2]
func.func @f(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> (tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}) {
  %c = par.sharding_constraint %x <@mesh, [{"dp"}, {}]> : tensor<8x16xf32>
  %e = math.exp %c {par.sharding = [#par.sharding<@mesh, [{"dp"}, {}]>]} : tensor<8x16xf32>
  %r = par.reshard %e <@mesh, [{}, {}]> : tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// -----

// Tests that an already partitioned program cannot be turned back.
par.mesh @mesh ["dp"=2]
func.func @partitioned(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'par.all_reduce' op cannot be stripped: the program is already partitioned}}
  %0 = par.all_reduce %x on @mesh axes = ["dp"] kind = sum : tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// RUN: par-opt %s --par-mark-entry-points | FileCheck %s --implicit-check-not=par.sharding --implicit-check-not=par.global_type --implicit-check-not=par.init --implicit-check-not=par.param

// Tests that public functions with a body get a C interface and lose the
// layout attributes (the manifest has them by now), and
// that private and external functions get no C interface.
par.mesh @mesh ["dp"=2]
// CHECK-LABEL: func.func @entry(
// CHECK-SAME:    %{{.*}}: tensor<4x8xf32>, %{{.*}}: tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-SAME:    attributes {llvm.emit_c_interface}
func.func @entry(%x: tensor<4x8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>, par.global_type = tensor<8x8xf32>},
                 %w: tensor<8xf32> {par.param, par.init = #par.init<ones>}) -> (tensor<4x8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) {
  return %x : tensor<4x8xf32>
}
// CHECK-LABEL: func.func private @helper(
// CHECK-NOT:     llvm.emit_c_interface
func.func private @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
// CHECK-LABEL: func.func private @external(
// CHECK-NOT:     llvm.emit_c_interface
func.func private @external(%x: tensor<4xf32>) -> tensor<4xf32>

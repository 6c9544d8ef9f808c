// RUN: par-opt %s --par-mark-entry-points | FileCheck %s --implicit-check-not=par.sharding --implicit-check-not=par.global_type --implicit-check-not=par.init --implicit-check-not=par.param --implicit-check-not=par.loss_scale

// Tests that public functions with a body get a C interface and lose the
// layout attributes and the loss-scale policy (the manifest has them by
// now; LLVM's translation warns about every unknown argument attribute), and
// that private and external functions get no C interface.
par.mesh @mesh ["dp"=2]
// CHECK-LABEL: func.func @entry(
// CHECK-SAME:    %{{.*}}: tensor<4x8xf32>, %{{.*}}: tensor<8xf32>, %{{.*}}: tensor<f32>) -> tensor<4x8xf32>
// CHECK-SAME:    attributes {llvm.emit_c_interface}
func.func @entry(%x: tensor<4x8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>, par.global_type = tensor<8x8xf32>},
                 %w: tensor<8xf32> {par.param, par.init = #par.init<ones>},
                 %s: tensor<f32> {par.init = #par.init<fill, 65536.0>, par.loss_scale = #par.loss_scale<kind = dynamic, init = 65536.0, growth = 2.0, backoff = 0.5, interval = 2000, hysteresis = 1, min = 1.0>}) -> (tensor<4x8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) {
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

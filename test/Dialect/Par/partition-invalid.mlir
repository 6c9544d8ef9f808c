// RUN: par-opt %s --par-spmd -split-input-file -verify-diagnostics

// Tests that a split that does not divide an annotated argument is an error
// naming the dimension, its size, the tensor and the axes.
par.mesh @mesh ["dp"=2, "tp"=4]
// expected-error @+1 {{dimension 1 (size 6) of 'tensor<8x6xf32>' is not divisible by the 4 devices of mesh axes ["tp"]}}
func.func @not_divisible(%x: tensor<8x6xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}) -> tensor<8x6xf32> {
  return %x : tensor<8x6xf32>
}

// -----

// Tests that a split of a dynamic dimension is an error.
par.mesh @mesh ["dp"=2, "tp"=4]
// expected-error @+1 {{dimension 0 of 'tensor<?x8xf32>' is dynamic and cannot be split over mesh axes ["dp"]}}
func.func @dynamic(%x: tensor<?x8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<?x8xf32> {
  return %x : tensor<?x8xf32>
}

// -----

// Tests that a reshard to a split that does not divide is an error at the
// reshard.
par.mesh @mesh ["dp"=2, "tp"=4]
func.func @reshard_not_divisible(%x: tensor<8x6xf32>) -> tensor<8x6xf32> {
  // expected-error @+1 {{cannot reshard 'tensor<8x6xf32>' from replicated to #par.sharding<@mesh, [{}, {"tp"}]>: dimension 1 (size 6) of 'tensor<8x6xf32>' is not divisible by the 4 devices of mesh axes ["tp"]}}
  %0 = par.reshard %x <@mesh, [{}, {"tp"}]> : tensor<8x6xf32>
  return %0 : tensor<8x6xf32>
}

// -----

// Tests that an op without a sharding rule asked to run on a split operand
// is an error naming the op and the sharding.
par.mesh @mesh ["dp"=2, "tp"=4]
func.func @no_rule(%x: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<10x8xf32> {
  %c0 = arith.constant 0.0 : f32
  // expected-error @+1 {{'tensor.pad' op has no sharding rule, so it cannot run with operand #0 sharded as #par.sharding<@mesh, [{"dp"}, {}]>}}
  %p = tensor.pad %x low[1, 0] high[1, 0] {
  ^bb0(%i: index, %j: index):
    tensor.yield %c0 : f32
  } : tensor<8x8xf32> to tensor<10x8xf32>
  return %p : tensor<10x8xf32>
}

// -----

// Tests that a contraction split over its reduction loop needs an init that
// holds the neutral value, and says so.
par.mesh @mesh ["dp"=2, "tp"=4]
func.func @bad_init(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
                    %b: tensor<16x8xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>},
                    %c: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'linalg.matmul' reduces over a loop split on mesh axes ["tp"], so its init must hold the neutral value of sum (e.g. a linalg.fill of 0 for sum)}}
  %m = linalg.matmul ins(%a, %b : tensor<8x16xf32>, tensor<16x8xf32>) outs(%c : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %m : tensor<8x8xf32>
}

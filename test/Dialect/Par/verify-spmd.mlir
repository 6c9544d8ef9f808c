// RUN: par-opt %s --par-verify-spmd -split-input-file -verify-diagnostics

// Tests that a partitioned signature that matches its shardings passes.
par.mesh @mesh ["dp"=2]
func.func @ok(%x: tensor<4x8xf32> {par.global_type = tensor<8x8xf32>, par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<4x8xf32> {
  return %x : tensor<4x8xf32>
}

// -----

// Tests that an annotation op left behind breaks the stage's contract.
par.mesh @mesh ["dp"=2]
func.func @left(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'par.reshard' op is left after partitioning}}
  %0 = par.reshard %x <@mesh, [{"dp"}, {}]> : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

// Tests that an argument whose type is not the local type of its global
// type under its sharding is caught.
par.mesh @mesh ["dp"=2]
// expected-error @+1 {{argument #0 has type 'tensor<8x8xf32>' but its sharding #par.sharding<@mesh, [{"dp"}, {}]> of 'tensor<8x8xf32>' needs 'tensor<4x8xf32>'}}
func.func @wrong_local(%x: tensor<8x8xf32> {par.global_type = tensor<8x8xf32>, par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<8x8xf32> {
  return %x : tensor<8x8xf32>
}

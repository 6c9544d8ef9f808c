// A train step whose forward splits no data argument over a mesh axis.
par.mesh @mesh ["tp"=2]
func.func private @f(%x: tensor<4x8xf32>, %w: tensor<8x12xf32> {par.param}) -> tensor<f32>
func.func @f_step(%x: tensor<4x8xf32>, %w: tensor<8x12xf32>, %g: tensor<8x12xf32>) -> (tensor<f32>, tensor<8x12xf32>) attributes {par.feedback = array<i64: 1, 1>} {
  %r = par.all_reduce %g on @mesh axes = ["tp"] kind = sum : tensor<8x12xf32>
  %c = arith.constant dense<0.0> : tensor<f32>
  return %c, %r : tensor<f32>, tensor<8x12xf32>
}

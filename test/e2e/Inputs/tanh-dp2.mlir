// A two-device program (batch over dp=2) for concurrent-launch.test.
par.mesh @mesh ["dp"=2]
func.func @f(%x: tensor<4x8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
             %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %h = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = math.tanh %h : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

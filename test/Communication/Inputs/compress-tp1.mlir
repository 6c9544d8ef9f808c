// compress-gradients-tp.mlir's TP1: "tp" has size 1 (no replicas), so a
// replicated and a tp-split gradient share one bucket.
par.mesh @mesh ["dp"=2, "tp"=1]
func.func private @f(%x: tensor<4x8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %w: tensor<16xf32> {par.param}) -> tensor<f32>
func.func private @g(%x: tensor<2x8xf32>)
    -> (tensor<16xf32> {par.sharding = #par.sharding<@mesh, [{}], partial sum {"dp"}>},
        tensor<8xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}], partial sum {"dp"}>})
func.func @f_step(%x: tensor<2x8xf32>, %p: tensor<16xf32>, %l: tensor<f32>) -> (tensor<f32>, tensor<16xf32>, tensor<8xf32>)
    attributes {par.feedback = array<i64: 1, 1>} {
  %g:2 = call @g(%x) : (tensor<2x8xf32>) -> (tensor<16xf32>, tensor<8xf32>)
  %r1 = par.all_reduce %g#0 on @mesh axes = ["dp"] kind = sum : tensor<16xf32>
  %r2 = par.all_reduce %g#1 on @mesh axes = ["dp"] kind = sum : tensor<8xf32>
  return %l, %r1, %r2 : tensor<f32>, tensor<16xf32>, tensor<8xf32>
}

// Data parallel, but no train step (no par.feedback) to rewrite.
par.mesh @mesh ["dp"=2]
func.func @f(%x: tensor<4x8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %w: tensor<8x12xf32> {par.param}) -> tensor<8x12xf32> {
  %r = par.all_reduce %w on @mesh axes = ["dp"] kind = sum : tensor<8x12xf32>
  return %r : tensor<8x12xf32>
}

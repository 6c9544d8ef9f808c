par.mesh @m ["x"=2]
func.func @f(%x: tensor<4x4xf32> {par.sharding = #par.sharding<@m, [{"x"}]>}) {
  return
}

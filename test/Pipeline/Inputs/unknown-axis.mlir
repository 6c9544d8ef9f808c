par.mesh @m ["x"=2]
func.func @f(%x: tensor<4xf32> {par.sharding = #par.sharding<@m, [{"q"}]>}) {
  return
}

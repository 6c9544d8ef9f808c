// Every element type of the dtype table through par-run (dtypes.test).
par.mesh @mesh ["dp"=2]
func.func @f(%a: tensor<4x3xf64> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
             %b: tensor<4x3xf16> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
             %c: tensor<4x3xi32> {par.sharding = #par.sharding<@mesh, [{}, {}]>},
             %d: tensor<4x3xi8> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
             %e: tensor<4x3xi1> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
             %g: tensor<4x3xbf16> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>})
    -> (tensor<4x3xf64>, tensor<4x3xf16>, tensor<4x3xi32>, tensor<4x3xi8>, tensor<4x3xi1>, tensor<4x3xbf16>) {
  %a2 = arith.addf %a, %a : tensor<4x3xf64>
  %b2 = arith.addf %b, %b : tensor<4x3xf16>
  %c2 = arith.addi %c, %c : tensor<4x3xi32>
  %d2 = arith.addi %d, %d : tensor<4x3xi8>
  %t = arith.constant dense<true> : tensor<4x3xi1>
  %e2 = arith.xori %e, %t : tensor<4x3xi1>
  %g2 = arith.addf %g, %g : tensor<4x3xbf16>
  return %a2, %b2, %c2, %d2, %e2, %g2 : tensor<4x3xf64>, tensor<4x3xf16>, tensor<4x3xi32>, tensor<4x3xi8>, tensor<4x3xi1>, tensor<4x3xbf16>
}

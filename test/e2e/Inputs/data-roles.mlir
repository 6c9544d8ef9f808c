// Copies out its tokens and targets (the frontend's par.data roles, not in
// the arg0/arg1 positions of par-run's old default), for weights.test.
par.mesh @mesh ["dp"=2]
#id = affine_map<(i, j) -> (i, j)>
func.func @ids(%x: tensor<4xf32>,
               %t: tensor<8x16xi64> {par.data = "tokens", par.vocab = 5 : i64, par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
               %y: tensor<8x16xi64> {par.data = "targets", par.vocab = 5 : i64, par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>})
    -> (tensor<8x16xi64>, tensor<8x16xi64>) {
  %e = tensor.empty() : tensor<8x16xi64>
  %r:2 = linalg.generic {indexing_maps = [#id, #id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%t, %y : tensor<8x16xi64>, tensor<8x16xi64>) outs(%e, %e : tensor<8x16xi64>, tensor<8x16xi64>) {
  ^bb0(%a: i64, %b: i64, %o: i64, %p: i64):
    %c0 = arith.constant 0 : i64
    %a2 = arith.addi %a, %c0 : i64
    %b2 = arith.addi %b, %c0 : i64
    linalg.yield %a2, %b2 : i64, i64
  } -> (tensor<8x16xi64>, tensor<8x16xi64>)
  return %r#0, %r#1 : tensor<8x16xi64>, tensor<8x16xi64>
}

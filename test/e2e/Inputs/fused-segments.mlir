// Two segments of one fused weight "w" [2, 8] (its columns 0:4 and 4:8, as
// par-import writes an HF Conv1D's c_attn split per segment), each sharded
// over tp on its columns; the function returns their sum.
module {
  par.mesh @mesh ["tp"=2]
  func.func @f(%a: tensor<2x4xf32> {par.param, par.name = "w.0", par.slice = {of = "w", dim = 1 : i64, offset = 0 : i64}, par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
               %b: tensor<2x4xf32> {par.param, par.name = "w.1", par.slice = {of = "w", dim = 1 : i64, offset = 4 : i64}, par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}) -> tensor<2x4xf32> {
    %0 = tensor.empty() : tensor<2x4xf32>
    %1 = linalg.add ins(%a, %b : tensor<2x4xf32>, tensor<2x4xf32>) outs(%0 : tensor<2x4xf32>) -> tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
}

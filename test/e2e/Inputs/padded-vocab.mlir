// A vocabulary table "wte" of 5 rows padded to 8 (par-import's
// vocabulary padding when tp does not divide the vocabulary), split over
// tp on its rows and tied to "head"; the function returns the table.
module {
  par.mesh @mesh ["tp"=2]
  func.func @f(%w: tensor<8x3xf32> {par.param, par.name = "wte", par.aliases = ["head"], par.slice = {of = "wte", dim = 0 : i64, offset = 0 : i64, extent = 5 : i64}, par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> tensor<8x3xf32> {
    %0 = tensor.empty() : tensor<8x3xf32>
    %1 = linalg.add ins(%w, %w : tensor<8x3xf32>, tensor<8x3xf32>) outs(%0 : tensor<8x3xf32>) -> tensor<8x3xf32>
    return %1 : tensor<8x3xf32>
  }
}

// A hand-written train step shaped like par-compress-gradients' output
// (par-run-compression.test): its data-parallel gradient g = the column
// sums of x (an all-reduce over dp), loss = g . w, w' = w - 0.01 g, and an
// error-feedback buffer e (one row per device of dp=2; the last argument,
// fed back by the last result) that accumulates the rows e + w. The
// compression numbers are made up: the runtime only reports them.
par.mesh @mesh ["dp"=2]
#id = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (j)>
#v = affine_map<(j) -> (j)>
#s = affine_map<(j) -> ()>
func.func @train_step(%w: tensor<4xf32> {par.init = #par.init<ones>},
                %x: tensor<8x4xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
                %e: tensor<2x4xf32> {par.error_feedback, par.init = #par.init<zeros>,
                                     par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>})
    -> (tensor<f32>, tensor<4xf32>,
        tensor<2x4xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>})
    attributes {par.feedback = array<i64: 1, 0, 2, 2>,
                par.compression = {method = "int8", compressed_bytes = 4.0 : f64,
                                   uncompressed_bytes = 16.0 : f64}} {
  %c0 = arith.constant 0.0 : f32
  %eg = tensor.empty() : tensor<4xf32>
  %zg = linalg.fill ins(%c0 : f32) outs(%eg : tensor<4xf32>) -> tensor<4xf32>
  %g = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%x : tensor<8x4xf32>) outs(%zg : tensor<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %el = tensor.empty() : tensor<f32>
  %zl = linalg.fill ins(%c0 : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [#v, #v, #s], iterator_types = ["reduction"]}
      ins(%g, %w : tensor<4xf32>, tensor<4xf32>) outs(%zl : tensor<f32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  %lr = arith.constant dense<0.01> : tensor<4xf32>
  %d = arith.mulf %g, %lr : tensor<4xf32>
  %w2 = arith.subf %w, %d : tensor<4xf32>
  %ee = tensor.empty() : tensor<2x4xf32>
  %e2 = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%e, %w : tensor<2x4xf32>, tensor<4xf32>) outs(%ee : tensor<2x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  return %l, %w2, %e2 : tensor<f32>, tensor<4xf32>, tensor<2x4xf32>
}

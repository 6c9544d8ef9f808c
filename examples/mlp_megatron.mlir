// Two-layer MLP with Megatron-style tensor parallelism (hand-written example).
//
//   y = gelu(x . W1) . W2
//
// Mesh: 2 x 4 = 8 devices, axes "dp" (data parallel) and "tp" (tensor
// parallel).
//   x  [8, 64]    batch split over "dp"          -> local [4, 64]
//   W1 [64, 256]  column split over "tp"         -> local [64, 64]
//   W2 [256, 64]  row split over "tp"            -> local [64, 64]
//   y  [8, 64]    batch split over "dp"          -> local [4, 64]
//
// The hidden activation gelu(x . W1) is naturally split over "tp" along its
// columns, so the first matmul and the GELU need no communication; the second
// matmul contracts over the "tp"-split dimension and produces partial sums
// that need one all-reduce over "tp" to reach the replicated-over-"tp"
// result sharding.
module {
  par.mesh @mesh ["dp"=2, "tp"=4]

  func.func @mlp(
      %x: tensor<8x64xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
      %w1: tensor<64x256xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
      %w2: tensor<256x64xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
  ) -> (tensor<8x64xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) {
    %zero = arith.constant 0.0 : f32
    %half = arith.constant 0.5 : f32
    %one = arith.constant 1.0 : f32
    %k = arith.constant 0.7978845608 : f32  // sqrt(2 / pi)
    %c = arith.constant 0.044715 : f32

    // h = x . W1
    %h_empty = tensor.empty() : tensor<8x256xf32>
    %h_init = linalg.fill ins(%zero : f32) outs(%h_empty : tensor<8x256xf32>) -> tensor<8x256xf32>
    %h = linalg.matmul ins(%x, %w1 : tensor<8x64xf32>, tensor<64x256xf32>)
                       outs(%h_init : tensor<8x256xf32>) -> tensor<8x256xf32>

    // g = gelu(h), tanh approximation:
    //   0.5 * h * (1 + tanh(sqrt(2/pi) * (h + 0.044715 * h^3)))
    %g_empty = tensor.empty() : tensor<8x256xf32>
    %g = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                                          affine_map<(d0, d1) -> (d0, d1)>],
                         iterator_types = ["parallel", "parallel"]}
        ins(%h : tensor<8x256xf32>) outs(%g_empty : tensor<8x256xf32>) {
    ^bb0(%in: f32, %out: f32):
      %x2 = arith.mulf %in, %in : f32
      %x3 = arith.mulf %x2, %in : f32
      %t0 = arith.mulf %x3, %c : f32
      %t1 = arith.addf %in, %t0 : f32
      %t2 = arith.mulf %t1, %k : f32
      %t3 = math.tanh %t2 : f32
      %t4 = arith.addf %t3, %one : f32
      %t5 = arith.mulf %in, %half : f32
      %r = arith.mulf %t5, %t4 : f32
      linalg.yield %r : f32
    } -> tensor<8x256xf32>

    // y = g . W2
    %y_empty = tensor.empty() : tensor<8x64xf32>
    %y_init = linalg.fill ins(%zero : f32) outs(%y_empty : tensor<8x64xf32>) -> tensor<8x64xf32>
    %y = linalg.matmul ins(%g, %w2 : tensor<8x256xf32>, tensor<256x64xf32>)
                       outs(%y_init : tensor<8x64xf32>) -> tensor<8x64xf32>
    return %y : tensor<8x64xf32>
  }
}

// A tiny GPT-style model as torch-mlir (torch 2.15, torch-mlir 20261001)
// exports it with output_type="linalg-on-tensors", parameters as arguments
// (torch.func.functional_call): wte/wpe embeddings (gather + cf.assert),
// LayerNorm (f64 variance, keepdim unit dims), a softmax (max + argmax),
// a tanh-GELU MLP (fpowi 3), an LM head, HF's label shift (tensor.pad
// -100) and cross-entropy with ignore_index (log_softmax, the row gather).
// V=16, D=8, T=8, B=4. par.param, the mesh and the shardings were added by
// hand: dp over the batch, fc column-parallel, fc2 row-parallel, the head
// vocab-parallel ([{"tp"}, {}]).
//   x = wte(idx) + wpe(arange(T)); a = ln(x)
//   x = x + softmax(a @ a^T, -1) @ a
//   h = fc(x); h = 0.5 h (1 + tanh(sqrt(2/pi) (h + 0.044715 h^3)))
//   x = x + fc2(h); logits = head(lnf(x))
//   loss = cross_entropy(logits, pad(tgt[:, 1:], (0, 1), -100), ignore_index=-100)
#map = affine_map<(d0, d1, d2) -> (d0, d1)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map2 = affine_map<(d0) -> (d0)>
#map3 = affine_map<(d0, d1) -> (d0)>
#map4 = affine_map<(d0, d1) -> (d0, d1)>
#map5 = affine_map<(d0, d1, d2) -> (d1, d2)>
#map6 = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
#map7 = affine_map<(d0, d1, d2) -> (d2)>
#map8 = affine_map<(d0, d1) -> (d1)>
#map9 = affine_map<(d0, d1) -> (d0, 0)>
#map10 = affine_map<(d0) -> ()>
#map11 = affine_map<() -> ()>
module {
  par.mesh @mesh ["dp"=2, "tp"=2]
  func.func @tiny(%arg0: tensor<16x8xf32> {par.param}, %arg1: tensor<8x8xf32> {par.param}, %arg2: tensor<8xf32> {par.param}, %arg3: tensor<8xf32> {par.param}, %arg4: tensor<32x8xf32> {par.param, par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}, %arg5: tensor<32xf32> {par.param, par.sharding = #par.sharding<@mesh, [{"tp"}]>}, %arg6: tensor<8x32xf32> {par.param, par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}, %arg7: tensor<8xf32> {par.param}, %arg8: tensor<8xf32> {par.param}, %arg9: tensor<8xf32> {par.param}, %arg10: tensor<16x8xf32> {par.param, par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}, %arg11: tensor<4x8xi64> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %arg12: tensor<4x8xi64> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<f32> {
    %c3_i64 = arith.constant 3 : i64
    %c-100_i64 = arith.constant -100 : i64
    %c0_i64 = arith.constant 0 : i64
    %c8 = arith.constant 8 : index
    %c16 = arith.constant 16 : index
    %cst = arith.constant 0.000000e+00 : f64
    %cst_0 = arith.constant 0.000000e+00 : f32
    %cst_1 = arith.constant 0xFF800000 : f32
    %cst_2 = arith.constant dense<0.000000e+00> : tensor<f32>
    %cst_3 = arith.constant 0.79788456080286541 : f64
    %cst_4 = arith.constant 4.471500e-02 : f64
    %cst_5 = arith.constant 1.000000e-05 : f64
    %cst_6 = arith.constant 8.000000e+00 : f64
    %cst_7 = arith.constant 8.000000e+00 : f32
    %cst_8 = arith.constant 5.000000e-01 : f32
    %cst_9 = arith.constant 1.000000e+00 : f32
    %cst_10 = arith.constant dense<0> : tensor<i64>
    %0 = tensor.empty() : tensor<4x8x8xf32>
    %1 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg11 : tensor<4x8xi64>) outs(%0 : tensor<4x8x8xf32>) {
    ^bb0(%in: i64, %out: f32):
      %108 = arith.index_cast %in : i64 to index
      %109 = linalg.index 2 : index
      %110 = arith.cmpi slt, %108, %c16 : index
      cf.assert %110, "index must be smaller than dim size"
      %111 = arith.cmpi sge, %in, %c0_i64 : i64
      cf.assert %111, "index must be larger or equal to 0"
      %extracted = tensor.extract %arg0[%108, %109] : tensor<16x8xf32>
      linalg.yield %extracted : f32
    } -> tensor<4x8x8xf32>
    %2 = tensor.empty() : tensor<8xi64>
    %3 = linalg.generic {indexing_maps = [#map2], iterator_types = ["parallel"]} outs(%2 : tensor<8xi64>) {
    ^bb0(%out: i64):
      %108 = linalg.index 0 : index
      %109 = arith.index_cast %108 : index to i64
      linalg.yield %109 : i64
    } -> tensor<8xi64>
    %4 = tensor.empty() : tensor<8x8xf32>
    %5 = linalg.generic {indexing_maps = [#map3, #map4], iterator_types = ["parallel", "parallel"]} ins(%3 : tensor<8xi64>) outs(%4 : tensor<8x8xf32>) {
    ^bb0(%in: i64, %out: f32):
      %108 = arith.index_cast %in : i64 to index
      %109 = linalg.index 1 : index
      %110 = arith.cmpi slt, %108, %c8 : index
      cf.assert %110, "index must be smaller than dim size"
      %111 = arith.cmpi sge, %in, %c0_i64 : i64
      cf.assert %111, "index must be larger or equal to 0"
      %extracted = tensor.extract %arg1[%108, %109] : tensor<8x8xf32>
      linalg.yield %extracted : f32
    } -> tensor<8x8xf32>
    %6 = linalg.generic {indexing_maps = [#map1, #map5, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%1, %5 : tensor<4x8x8xf32>, tensor<8x8xf32>) outs(%0 : tensor<4x8x8xf32>) {
    ^bb0(%in: f32, %in_22: f32, %out: f32):
      %108 = arith.addf %in, %in_22 : f32
      linalg.yield %108 : f32
    } -> tensor<4x8x8xf32>
    %7 = tensor.empty() : tensor<4x8x8xf64>
    %8 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%6 : tensor<4x8x8xf32>) outs(%7 : tensor<4x8x8xf64>) {
    ^bb0(%in: f32, %out: f64):
      %108 = arith.extf %in : f32 to f64
      linalg.yield %108 : f64
    } -> tensor<4x8x8xf64>
    %9 = tensor.empty() : tensor<4x8x1xf64>
    %10 = linalg.fill ins(%cst : f64) outs(%9 : tensor<4x8x1xf64>) -> tensor<4x8x1xf64>
    %11 = linalg.generic {indexing_maps = [#map1, #map6], iterator_types = ["parallel", "parallel", "reduction"]} ins(%8 : tensor<4x8x8xf64>) outs(%10 : tensor<4x8x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %108 = arith.addf %in, %out : f64
      linalg.yield %108 : f64
    } -> tensor<4x8x1xf64>
    %12 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%11 : tensor<4x8x1xf64>) outs(%9 : tensor<4x8x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %108 = arith.divf %in, %cst_6 : f64
      linalg.yield %108 : f64
    } -> tensor<4x8x1xf64>
    %13 = linalg.generic {indexing_maps = [#map1, #map6, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%8, %12 : tensor<4x8x8xf64>, tensor<4x8x1xf64>) outs(%7 : tensor<4x8x8xf64>) {
    ^bb0(%in: f64, %in_22: f64, %out: f64):
      %108 = arith.subf %in, %in_22 : f64
      linalg.yield %108 : f64
    } -> tensor<4x8x8xf64>
    %14 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%13, %13 : tensor<4x8x8xf64>, tensor<4x8x8xf64>) outs(%7 : tensor<4x8x8xf64>) {
    ^bb0(%in: f64, %in_22: f64, %out: f64):
      %108 = arith.mulf %in, %in_22 : f64
      linalg.yield %108 : f64
    } -> tensor<4x8x8xf64>
    %15 = linalg.generic {indexing_maps = [#map1, #map6], iterator_types = ["parallel", "parallel", "reduction"]} ins(%14 : tensor<4x8x8xf64>) outs(%10 : tensor<4x8x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %108 = arith.addf %in, %out : f64
      linalg.yield %108 : f64
    } -> tensor<4x8x1xf64>
    %16 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%15 : tensor<4x8x1xf64>) outs(%9 : tensor<4x8x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %108 = arith.divf %in, %cst_6 : f64
      linalg.yield %108 : f64
    } -> tensor<4x8x1xf64>
    %17 = tensor.empty() : tensor<4x8x1xf32>
    %18 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%16 : tensor<4x8x1xf64>) outs(%17 : tensor<4x8x1xf32>) {
    ^bb0(%in: f64, %out: f32):
      %108 = arith.truncf %in : f64 to f32
      linalg.yield %108 : f32
    } -> tensor<4x8x1xf32>
    %19 = linalg.fill ins(%cst_0 : f32) outs(%17 : tensor<4x8x1xf32>) -> tensor<4x8x1xf32>
    %20 = linalg.generic {indexing_maps = [#map1, #map6], iterator_types = ["parallel", "parallel", "reduction"]} ins(%6 : tensor<4x8x8xf32>) outs(%19 : tensor<4x8x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %108 = arith.addf %in, %out : f32
      linalg.yield %108 : f32
    } -> tensor<4x8x1xf32>
    %21 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%20 : tensor<4x8x1xf32>) outs(%17 : tensor<4x8x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %108 = arith.divf %in, %cst_7 : f32
      linalg.yield %108 : f32
    } -> tensor<4x8x1xf32>
    %22 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%18 : tensor<4x8x1xf32>) outs(%17 : tensor<4x8x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %108 = arith.truncf %cst_5 : f64 to f32
      %109 = arith.addf %in, %108 : f32
      linalg.yield %109 : f32
    } -> tensor<4x8x1xf32>
    %23 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%22 : tensor<4x8x1xf32>) outs(%17 : tensor<4x8x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %108 = math.rsqrt %in : f32
      linalg.yield %108 : f32
    } -> tensor<4x8x1xf32>
    %24 = linalg.generic {indexing_maps = [#map1, #map6, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%6, %21 : tensor<4x8x8xf32>, tensor<4x8x1xf32>) outs(%0 : tensor<4x8x8xf32>) {
    ^bb0(%in: f32, %in_22: f32, %out: f32):
      %108 = arith.subf %in, %in_22 : f32
      linalg.yield %108 : f32
    } -> tensor<4x8x8xf32>
    %25 = linalg.generic {indexing_maps = [#map1, #map6, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%24, %23 : tensor<4x8x8xf32>, tensor<4x8x1xf32>) outs(%0 : tensor<4x8x8xf32>) {
    ^bb0(%in: f32, %in_22: f32, %out: f32):
      %108 = arith.mulf %in, %in_22 : f32
      linalg.yield %108 : f32
    } -> tensor<4x8x8xf32>
    %26 = linalg.generic {indexing_maps = [#map1, #map7, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%25, %arg2 : tensor<4x8x8xf32>, tensor<8xf32>) outs(%0 : tensor<4x8x8xf32>) {
    ^bb0(%in: f32, %in_22: f32, %out: f32):
      %108 = arith.mulf %in, %in_22 : f32
      linalg.yield %108 : f32
    } -> tensor<4x8x8xf32>
    %27 = linalg.generic {indexing_maps = [#map1, #map7, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%26, %arg3 : tensor<4x8x8xf32>, tensor<8xf32>) outs(%0 : tensor<4x8x8xf32>) {
    ^bb0(%in: f32, %in_22: f32, %out: f32):
      %108 = arith.addf %in, %in_22 : f32
      linalg.yield %108 : f32
    } -> tensor<4x8x8xf32>
    %transposed = linalg.transpose ins(%27 : tensor<4x8x8xf32>) outs(%0 : tensor<4x8x8xf32>) permutation = [0, 2, 1] 
    %28 = linalg.fill ins(%cst_0 : f32) outs(%0 : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
    %29 = linalg.batch_matmul ins(%27, %transposed : tensor<4x8x8xf32>, tensor<4x8x8xf32>) outs(%28 : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
    %30 = tensor.empty() : tensor<4x8xi64>
    %31 = linalg.fill ins(%c0_i64 : i64) outs(%30 : tensor<4x8xi64>) -> tensor<4x8xi64>
    %32 = tensor.empty() : tensor<4x8xf32>
    %33 = linalg.fill ins(%cst_1 : f32) outs(%32 : tensor<4x8xf32>) -> tensor<4x8xf32>
    %34:2 = linalg.generic {indexing_maps = [#map1, #map, #map], iterator_types = ["parallel", "parallel", "reduction"]} ins(%29 : tensor<4x8x8xf32>) outs(%33, %31 : tensor<4x8xf32>, tensor<4x8xi64>) {
    ^bb0(%in: f32, %out: f32, %out_22: i64):
      %108 = linalg.index 2 : index
      %109 = arith.index_cast %108 : index to i64
      %110 = arith.maximumf %in, %out : f32
      %111 = arith.cmpf ogt, %in, %out : f32
      %112 = arith.select %111, %109, %out_22 : i64
      linalg.yield %110, %112 : f32, i64
    } -> (tensor<4x8xf32>, tensor<4x8xi64>)
    %expanded = tensor.expand_shape %34#0 [[0], [1, 2]] output_shape [4, 8, 1] : tensor<4x8xf32> into tensor<4x8x1xf32>
    %35 = linalg.generic {indexing_maps = [#map1, #map6, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%29, %expanded : tensor<4x8x8xf32>, tensor<4x8x1xf32>) outs(%0 : tensor<4x8x8xf32>) {
    ^bb0(%in: f32, %in_22: f32, %out: f32):
      %108 = arith.subf %in, %in_22 : f32
      linalg.yield %108 : f32
    } -> tensor<4x8x8xf32>
    %36 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%35 : tensor<4x8x8xf32>) outs(%0 : tensor<4x8x8xf32>) {
    ^bb0(%in: f32, %out: f32):
      %108 = math.exp %in : f32
      linalg.yield %108 : f32
    } -> tensor<4x8x8xf32>
    %37 = linalg.generic {indexing_maps = [#map1, #map6], iterator_types = ["parallel", "parallel", "reduction"]} ins(%36 : tensor<4x8x8xf32>) outs(%19 : tensor<4x8x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %108 = arith.addf %in, %out : f32
      linalg.yield %108 : f32
    } -> tensor<4x8x1xf32>
    %38 = linalg.generic {indexing_maps = [#map1, #map6, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%36, %37 : tensor<4x8x8xf32>, tensor<4x8x1xf32>) outs(%0 : tensor<4x8x8xf32>) {
    ^bb0(%in: f32, %in_22: f32, %out: f32):
      %108 = arith.divf %in, %in_22 : f32
      linalg.yield %108 : f32
    } -> tensor<4x8x8xf32>
    %39 = linalg.batch_matmul ins(%38, %27 : tensor<4x8x8xf32>, tensor<4x8x8xf32>) outs(%28 : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
    %40 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%6, %39 : tensor<4x8x8xf32>, tensor<4x8x8xf32>) outs(%0 : tensor<4x8x8xf32>) {
    ^bb0(%in: f32, %in_22: f32, %out: f32):
      %108 = arith.addf %in, %in_22 : f32
      linalg.yield %108 : f32
    } -> tensor<4x8x8xf32>
    %collapsed = tensor.collapse_shape %40 [[0, 1], [2]] : tensor<4x8x8xf32> into tensor<32x8xf32>
    %41 = tensor.empty() : tensor<8x32xf32>
    %transposed_11 = linalg.transpose ins(%arg4 : tensor<32x8xf32>) outs(%41 : tensor<8x32xf32>) permutation = [1, 0] 
    %42 = tensor.empty() : tensor<32x32xf32>
    %43 = linalg.fill ins(%cst_0 : f32) outs(%42 : tensor<32x32xf32>) -> tensor<32x32xf32>
    %44 = linalg.matmul ins(%collapsed, %transposed_11 : tensor<32x8xf32>, tensor<8x32xf32>) outs(%43 : tensor<32x32xf32>) -> tensor<32x32xf32>
    %45 = linalg.generic {indexing_maps = [#map8, #map4], iterator_types = ["parallel", "parallel"]} ins(%arg5 : tensor<32xf32>) outs(%42 : tensor<32x32xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<32x32xf32>
    %46 = linalg.generic {indexing_maps = [#map4, #map4, #map4], iterator_types = ["parallel", "parallel"]} ins(%44, %45 : tensor<32x32xf32>, tensor<32x32xf32>) outs(%42 : tensor<32x32xf32>) {
    ^bb0(%in: f32, %in_22: f32, %out: f32):
      %108 = arith.addf %in, %in_22 : f32
      linalg.yield %108 : f32
    } -> tensor<32x32xf32>
    %expanded_12 = tensor.expand_shape %46 [[0, 1], [2]] output_shape [4, 8, 32] : tensor<32x32xf32> into tensor<4x8x32xf32>
    %47 = tensor.empty() : tensor<4x8x32xf32>
    %48 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%expanded_12 : tensor<4x8x32xf32>) outs(%47 : tensor<4x8x32xf32>) {
    ^bb0(%in: f32, %out: f32):
      %108 = arith.mulf %in, %cst_8 : f32
      linalg.yield %108 : f32
    } -> tensor<4x8x32xf32>
    %49 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%expanded_12 : tensor<4x8x32xf32>) outs(%47 : tensor<4x8x32xf32>) {
    ^bb0(%in: f32, %out: f32):
      %108 = math.fpowi %in, %c3_i64 : f32, i64
      linalg.yield %108 : f32
    } -> tensor<4x8x32xf32>
    %50 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%49 : tensor<4x8x32xf32>) outs(%47 : tensor<4x8x32xf32>) {
    ^bb0(%in: f32, %out: f32):
      %108 = arith.truncf %cst_4 : f64 to f32
      %109 = arith.mulf %in, %108 : f32
      linalg.yield %109 : f32
    } -> tensor<4x8x32xf32>
    %51 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%expanded_12, %50 : tensor<4x8x32xf32>, tensor<4x8x32xf32>) outs(%47 : tensor<4x8x32xf32>) {
    ^bb0(%in: f32, %in_22: f32, %out: f32):
      %108 = arith.addf %in, %in_22 : f32
      linalg.yield %108 : f32
    } -> tensor<4x8x32xf32>
    %52 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%51 : tensor<4x8x32xf32>) outs(%47 : tensor<4x8x32xf32>) {
    ^bb0(%in: f32, %out: f32):
      %108 = arith.truncf %cst_3 : f64 to f32
      %109 = arith.mulf %in, %108 : f32
      linalg.yield %109 : f32
    } -> tensor<4x8x32xf32>
    %53 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%52 : tensor<4x8x32xf32>) outs(%47 : tensor<4x8x32xf32>) {
    ^bb0(%in: f32, %out: f32):
      %108 = math.tanh %in : f32
      linalg.yield %108 : f32
    } -> tensor<4x8x32xf32>
    %54 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%53 : tensor<4x8x32xf32>) outs(%47 : tensor<4x8x32xf32>) {
    ^bb0(%in: f32, %out: f32):
      %108 = arith.addf %in, %cst_9 : f32
      linalg.yield %108 : f32
    } -> tensor<4x8x32xf32>
    %55 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%48, %54 : tensor<4x8x32xf32>, tensor<4x8x32xf32>) outs(%47 : tensor<4x8x32xf32>) {
    ^bb0(%in: f32, %in_22: f32, %out: f32):
      %108 = arith.mulf %in, %in_22 : f32
      linalg.yield %108 : f32
    } -> tensor<4x8x32xf32>
    %collapsed_13 = tensor.collapse_shape %55 [[0, 1], [2]] : tensor<4x8x32xf32> into tensor<32x32xf32>
    %56 = tensor.empty() : tensor<32x8xf32>
    %transposed_14 = linalg.transpose ins(%arg6 : tensor<8x32xf32>) outs(%56 : tensor<32x8xf32>) permutation = [1, 0] 
    %57 = linalg.fill ins(%cst_0 : f32) outs(%56 : tensor<32x8xf32>) -> tensor<32x8xf32>
    %58 = linalg.matmul ins(%collapsed_13, %transposed_14 : tensor<32x32xf32>, tensor<32x8xf32>) outs(%57 : tensor<32x8xf32>) -> tensor<32x8xf32>
    %59 = linalg.generic {indexing_maps = [#map8, #map4], iterator_types = ["parallel", "parallel"]} ins(%arg7 : tensor<8xf32>) outs(%56 : tensor<32x8xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<32x8xf32>
    %60 = linalg.generic {indexing_maps = [#map4, #map4, #map4], iterator_types = ["parallel", "parallel"]} ins(%58, %59 : tensor<32x8xf32>, tensor<32x8xf32>) outs(%56 : tensor<32x8xf32>) {
    ^bb0(%in: f32, %in_22: f32, %out: f32):
      %108 = arith.addf %in, %in_22 : f32
      linalg.yield %108 : f32
    } -> tensor<32x8xf32>
    %expanded_15 = tensor.expand_shape %60 [[0, 1], [2]] output_shape [4, 8, 8] : tensor<32x8xf32> into tensor<4x8x8xf32>
    %61 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%40, %expanded_15 : tensor<4x8x8xf32>, tensor<4x8x8xf32>) outs(%0 : tensor<4x8x8xf32>) {
    ^bb0(%in: f32, %in_22: f32, %out: f32):
      %108 = arith.addf %in, %in_22 : f32
      linalg.yield %108 : f32
    } -> tensor<4x8x8xf32>
    %62 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%61 : tensor<4x8x8xf32>) outs(%7 : tensor<4x8x8xf64>) {
    ^bb0(%in: f32, %out: f64):
      %108 = arith.extf %in : f32 to f64
      linalg.yield %108 : f64
    } -> tensor<4x8x8xf64>
    %63 = linalg.generic {indexing_maps = [#map1, #map6], iterator_types = ["parallel", "parallel", "reduction"]} ins(%62 : tensor<4x8x8xf64>) outs(%10 : tensor<4x8x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %108 = arith.addf %in, %out : f64
      linalg.yield %108 : f64
    } -> tensor<4x8x1xf64>
    %64 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%63 : tensor<4x8x1xf64>) outs(%9 : tensor<4x8x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %108 = arith.divf %in, %cst_6 : f64
      linalg.yield %108 : f64
    } -> tensor<4x8x1xf64>
    %65 = linalg.generic {indexing_maps = [#map1, #map6, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%62, %64 : tensor<4x8x8xf64>, tensor<4x8x1xf64>) outs(%7 : tensor<4x8x8xf64>) {
    ^bb0(%in: f64, %in_22: f64, %out: f64):
      %108 = arith.subf %in, %in_22 : f64
      linalg.yield %108 : f64
    } -> tensor<4x8x8xf64>
    %66 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%65, %65 : tensor<4x8x8xf64>, tensor<4x8x8xf64>) outs(%7 : tensor<4x8x8xf64>) {
    ^bb0(%in: f64, %in_22: f64, %out: f64):
      %108 = arith.mulf %in, %in_22 : f64
      linalg.yield %108 : f64
    } -> tensor<4x8x8xf64>
    %67 = linalg.generic {indexing_maps = [#map1, #map6], iterator_types = ["parallel", "parallel", "reduction"]} ins(%66 : tensor<4x8x8xf64>) outs(%10 : tensor<4x8x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %108 = arith.addf %in, %out : f64
      linalg.yield %108 : f64
    } -> tensor<4x8x1xf64>
    %68 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%67 : tensor<4x8x1xf64>) outs(%9 : tensor<4x8x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %108 = arith.divf %in, %cst_6 : f64
      linalg.yield %108 : f64
    } -> tensor<4x8x1xf64>
    %69 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%68 : tensor<4x8x1xf64>) outs(%17 : tensor<4x8x1xf32>) {
    ^bb0(%in: f64, %out: f32):
      %108 = arith.truncf %in : f64 to f32
      linalg.yield %108 : f32
    } -> tensor<4x8x1xf32>
    %70 = linalg.generic {indexing_maps = [#map1, #map6], iterator_types = ["parallel", "parallel", "reduction"]} ins(%61 : tensor<4x8x8xf32>) outs(%19 : tensor<4x8x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %108 = arith.addf %in, %out : f32
      linalg.yield %108 : f32
    } -> tensor<4x8x1xf32>
    %71 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%70 : tensor<4x8x1xf32>) outs(%17 : tensor<4x8x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %108 = arith.divf %in, %cst_7 : f32
      linalg.yield %108 : f32
    } -> tensor<4x8x1xf32>
    %72 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%69 : tensor<4x8x1xf32>) outs(%17 : tensor<4x8x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %108 = arith.truncf %cst_5 : f64 to f32
      %109 = arith.addf %in, %108 : f32
      linalg.yield %109 : f32
    } -> tensor<4x8x1xf32>
    %73 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%72 : tensor<4x8x1xf32>) outs(%17 : tensor<4x8x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %108 = math.rsqrt %in : f32
      linalg.yield %108 : f32
    } -> tensor<4x8x1xf32>
    %74 = linalg.generic {indexing_maps = [#map1, #map6, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%61, %71 : tensor<4x8x8xf32>, tensor<4x8x1xf32>) outs(%0 : tensor<4x8x8xf32>) {
    ^bb0(%in: f32, %in_22: f32, %out: f32):
      %108 = arith.subf %in, %in_22 : f32
      linalg.yield %108 : f32
    } -> tensor<4x8x8xf32>
    %75 = linalg.generic {indexing_maps = [#map1, #map6, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%74, %73 : tensor<4x8x8xf32>, tensor<4x8x1xf32>) outs(%0 : tensor<4x8x8xf32>) {
    ^bb0(%in: f32, %in_22: f32, %out: f32):
      %108 = arith.mulf %in, %in_22 : f32
      linalg.yield %108 : f32
    } -> tensor<4x8x8xf32>
    %76 = linalg.generic {indexing_maps = [#map1, #map7, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%75, %arg8 : tensor<4x8x8xf32>, tensor<8xf32>) outs(%0 : tensor<4x8x8xf32>) {
    ^bb0(%in: f32, %in_22: f32, %out: f32):
      %108 = arith.mulf %in, %in_22 : f32
      linalg.yield %108 : f32
    } -> tensor<4x8x8xf32>
    %77 = linalg.generic {indexing_maps = [#map1, #map7, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%76, %arg9 : tensor<4x8x8xf32>, tensor<8xf32>) outs(%0 : tensor<4x8x8xf32>) {
    ^bb0(%in: f32, %in_22: f32, %out: f32):
      %108 = arith.addf %in, %in_22 : f32
      linalg.yield %108 : f32
    } -> tensor<4x8x8xf32>
    %78 = tensor.empty() : tensor<8x16xf32>
    %transposed_16 = linalg.transpose ins(%arg10 : tensor<16x8xf32>) outs(%78 : tensor<8x16xf32>) permutation = [1, 0] 
    %collapsed_17 = tensor.collapse_shape %77 [[0, 1], [2]] : tensor<4x8x8xf32> into tensor<32x8xf32>
    %79 = tensor.empty() : tensor<32x16xf32>
    %80 = linalg.fill ins(%cst_0 : f32) outs(%79 : tensor<32x16xf32>) -> tensor<32x16xf32>
    %81 = linalg.matmul ins(%collapsed_17, %transposed_16 : tensor<32x8xf32>, tensor<8x16xf32>) outs(%80 : tensor<32x16xf32>) -> tensor<32x16xf32>
    %extracted_slice = tensor.extract_slice %arg12[0, 1] [4, 7] [1, 1] : tensor<4x8xi64> to tensor<4x7xi64>
    %padded = tensor.pad %extracted_slice low[0, 0] high[0, 1] {
    ^bb0(%arg13: index, %arg14: index):
      tensor.yield %c-100_i64 : i64
    } : tensor<4x7xi64> to tensor<4x8xi64>
    %collapsed_18 = tensor.collapse_shape %padded [[0, 1]] : tensor<4x8xi64> into tensor<32xi64>
    %82 = tensor.empty() : tensor<32xi64>
    %83 = linalg.fill ins(%c0_i64 : i64) outs(%82 : tensor<32xi64>) -> tensor<32xi64>
    %84 = tensor.empty() : tensor<32xf32>
    %85 = linalg.fill ins(%cst_1 : f32) outs(%84 : tensor<32xf32>) -> tensor<32xf32>
    %86:2 = linalg.generic {indexing_maps = [#map4, #map3, #map3], iterator_types = ["parallel", "reduction"]} ins(%81 : tensor<32x16xf32>) outs(%85, %83 : tensor<32xf32>, tensor<32xi64>) {
    ^bb0(%in: f32, %out: f32, %out_22: i64):
      %108 = linalg.index 1 : index
      %109 = arith.index_cast %108 : index to i64
      %110 = arith.maximumf %in, %out : f32
      %111 = arith.cmpf ogt, %in, %out : f32
      %112 = arith.select %111, %109, %out_22 : i64
      linalg.yield %110, %112 : f32, i64
    } -> (tensor<32xf32>, tensor<32xi64>)
    %expanded_19 = tensor.expand_shape %86#0 [[0, 1]] output_shape [32, 1] : tensor<32xf32> into tensor<32x1xf32>
    %87 = linalg.generic {indexing_maps = [#map4, #map9, #map4], iterator_types = ["parallel", "parallel"]} ins(%81, %expanded_19 : tensor<32x16xf32>, tensor<32x1xf32>) outs(%79 : tensor<32x16xf32>) {
    ^bb0(%in: f32, %in_22: f32, %out: f32):
      %108 = arith.subf %in, %in_22 : f32
      linalg.yield %108 : f32
    } -> tensor<32x16xf32>
    %88 = linalg.generic {indexing_maps = [#map4, #map4], iterator_types = ["parallel", "parallel"]} ins(%87 : tensor<32x16xf32>) outs(%79 : tensor<32x16xf32>) {
    ^bb0(%in: f32, %out: f32):
      %108 = math.exp %in : f32
      linalg.yield %108 : f32
    } -> tensor<32x16xf32>
    %89 = tensor.empty() : tensor<32x1xf32>
    %90 = linalg.fill ins(%cst_0 : f32) outs(%89 : tensor<32x1xf32>) -> tensor<32x1xf32>
    %91 = linalg.generic {indexing_maps = [#map4, #map9], iterator_types = ["parallel", "reduction"]} ins(%88 : tensor<32x16xf32>) outs(%90 : tensor<32x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %108 = arith.addf %in, %out : f32
      linalg.yield %108 : f32
    } -> tensor<32x1xf32>
    %92 = linalg.generic {indexing_maps = [#map4, #map4], iterator_types = ["parallel", "parallel"]} ins(%91 : tensor<32x1xf32>) outs(%89 : tensor<32x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %108 = math.log %in : f32
      linalg.yield %108 : f32
    } -> tensor<32x1xf32>
    %93 = linalg.generic {indexing_maps = [#map4, #map9, #map4], iterator_types = ["parallel", "parallel"]} ins(%87, %92 : tensor<32x16xf32>, tensor<32x1xf32>) outs(%79 : tensor<32x16xf32>) {
    ^bb0(%in: f32, %in_22: f32, %out: f32):
      %108 = arith.subf %in, %in_22 : f32
      linalg.yield %108 : f32
    } -> tensor<32x16xf32>
    %94 = tensor.empty() : tensor<32xi1>
    %95 = linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel"]} ins(%collapsed_18 : tensor<32xi64>) outs(%94 : tensor<32xi1>) {
    ^bb0(%in: i64, %out: i1):
      %108 = arith.cmpi ne, %in, %c-100_i64 : i64
      linalg.yield %108 : i1
    } -> tensor<32xi1>
    %96 = linalg.generic {indexing_maps = [#map2, #map2, #map10, #map2], iterator_types = ["parallel"]} ins(%95, %collapsed_18, %cst_10 : tensor<32xi1>, tensor<32xi64>, tensor<i64>) outs(%82 : tensor<32xi64>) {
    ^bb0(%in: i1, %in_22: i64, %in_23: i64, %out: i64):
      %108 = arith.select %in, %in_22, %in_23 : i64
      linalg.yield %108 : i64
    } -> tensor<32xi64>
    %expanded_20 = tensor.expand_shape %96 [[0, 1]] output_shape [32, 1] : tensor<32xi64> into tensor<32x1xi64>
    %97 = linalg.generic {indexing_maps = [#map4, #map4], iterator_types = ["parallel", "parallel"]} ins(%expanded_20 : tensor<32x1xi64>) outs(%90 : tensor<32x1xf32>) {
    ^bb0(%in: i64, %out: f32):
      %108 = linalg.index 0 : index
      %109 = arith.index_cast %in : i64 to index
      %110 = arith.cmpi slt, %109, %c16 : index
      cf.assert %110, "index must be smaller than dim size"
      %111 = arith.cmpi sge, %in, %c0_i64 : i64
      cf.assert %111, "index must be larger or equal to 0"
      %extracted = tensor.extract %93[%108, %109] : tensor<32x16xf32>
      linalg.yield %extracted : f32
    } -> tensor<32x1xf32>
    %collapsed_21 = tensor.collapse_shape %97 [[0, 1]] : tensor<32x1xf32> into tensor<32xf32>
    %98 = linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel"]} ins(%collapsed_21 : tensor<32xf32>) outs(%84 : tensor<32xf32>) {
    ^bb0(%in: f32, %out: f32):
      %108 = arith.negf %in : f32
      linalg.yield %108 : f32
    } -> tensor<32xf32>
    %99 = linalg.generic {indexing_maps = [#map2, #map2, #map10, #map2], iterator_types = ["parallel"]} ins(%95, %98, %cst_2 : tensor<32xi1>, tensor<32xf32>, tensor<f32>) outs(%84 : tensor<32xf32>) {
    ^bb0(%in: i1, %in_22: f32, %in_23: f32, %out: f32):
      %108 = arith.select %in, %in_22, %in_23 : f32
      linalg.yield %108 : f32
    } -> tensor<32xf32>
    %100 = tensor.empty() : tensor<i64>
    %101 = linalg.fill ins(%c0_i64 : i64) outs(%100 : tensor<i64>) -> tensor<i64>
    %102 = linalg.generic {indexing_maps = [#map2, #map10], iterator_types = ["reduction"]} ins(%95 : tensor<32xi1>) outs(%101 : tensor<i64>) {
    ^bb0(%in: i1, %out: i64):
      %108 = arith.extui %in : i1 to i64
      %109 = arith.addi %108, %out : i64
      linalg.yield %109 : i64
    } -> tensor<i64>
    %103 = tensor.empty() : tensor<f32>
    %104 = linalg.generic {indexing_maps = [#map11, #map11], iterator_types = []} ins(%102 : tensor<i64>) outs(%103 : tensor<f32>) {
    ^bb0(%in: i64, %out: f32):
      %108 = arith.sitofp %in : i64 to f32
      linalg.yield %108 : f32
    } -> tensor<f32>
    %105 = linalg.fill ins(%cst_0 : f32) outs(%103 : tensor<f32>) -> tensor<f32>
    %106 = linalg.generic {indexing_maps = [#map2, #map10], iterator_types = ["reduction"]} ins(%99 : tensor<32xf32>) outs(%105 : tensor<f32>) {
    ^bb0(%in: f32, %out: f32):
      %108 = arith.addf %in, %out : f32
      linalg.yield %108 : f32
    } -> tensor<f32>
    %107 = linalg.generic {indexing_maps = [#map11, #map11, #map11], iterator_types = []} ins(%106, %104 : tensor<f32>, tensor<f32>) outs(%103 : tensor<f32>) {
    ^bb0(%in: f32, %in_22: f32, %out: f32):
      %108 = arith.divf %in, %in_22 : f32
      linalg.yield %108 : f32
    } -> tensor<f32>
    return %107 : tensor<f32>
  }
}

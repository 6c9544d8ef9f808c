// RUN: par-opt %s --par-sharding-propagation --par-sequence-parallel -split-input-file -verify-diagnostics

// Tests that a mesh without the tensor-parallel axis is named.
// expected-error@below {{sequence-parallel: no par.mesh has the axis 'tp'}}
par.mesh @mesh ["dp"=2, "mp"=2]
func.func @no_axis(%x: tensor<4x8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>}) -> tensor<4x8x16xf32> {
  return %x : tensor<4x8x16xf32>
}

// -----

#map3 = affine_map<(b, s, h) -> (b, s, h)>

// Tests that a model without Megatron pairs (nothing reduced over tp) is
// refused rather than left as it was.
// expected-error@below {{sequence-parallel: no reduction over 'tp' reaches a [batch, sequence, hidden] activation}}
par.mesh @mesh ["dp"=2, "tp"=2]
func.func @no_pairs(%x: tensor<4x8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>}) -> tensor<4x8x16xf32> {
  %e = tensor.empty() : tensor<4x8x16xf32>
  %r = linalg.generic {indexing_maps = [#map3, #map3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : tensor<4x8x16xf32>) outs(%e : tensor<4x8x16xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = math.exp %a : f32
    linalg.yield %s : f32
  } -> tensor<4x8x16xf32>
  return %r : tensor<4x8x16xf32>
}

// -----

#map3 = affine_map<(b, s, h) -> (b, s, h)>

// Tests that a sequence length the tensor-parallel size does not divide is
// named with the tensor, the dim and the sizes.
par.mesh @mesh ["dp"=2, "tp"=4]
func.func @odd_sequence(%h: tensor<24x32xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>},
                        %w: tensor<32x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>},
                        %x: tensor<4x6x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>}) -> tensor<4x6x16xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<24x16xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<24x16xf32>) -> tensor<24x16xf32>
  %o = linalg.matmul ins(%h, %w : tensor<24x32xf32>, tensor<32x16xf32>) outs(%z : tensor<24x16xf32>) -> tensor<24x16xf32>
  // expected-error@below {{sequence-parallel: the sequence (dim 1, 6) of 'tensor<4x6x16xf32>' in @odd_sequence cannot be split over 'tp' (4); use a sequence length divisible by the tensor-parallel size}}
  %oe = tensor.expand_shape %o [[0, 1], [2]] output_shape [4, 6, 16] : tensor<24x16xf32> into tensor<4x6x16xf32>
  %e3 = tensor.empty() : tensor<4x6x16xf32>
  %r = linalg.generic {indexing_maps = [#map3, #map3, #map3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %oe : tensor<4x6x16xf32>, tensor<4x6x16xf32>) outs(%e3 : tensor<4x6x16xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<4x6x16xf32>
  return %r : tensor<4x6x16xf32>
}

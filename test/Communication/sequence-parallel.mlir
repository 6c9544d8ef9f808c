// RUN: par-opt %s --par-split-constants --par-sharding-propagation --par-sequence-parallel -split-input-file | FileCheck %s
// RUN: par-opt %s "--par-spmd=sequence-parallel=true bucket-bytes=0" -split-input-file | FileCheck %s --check-prefix=SPMD --implicit-check-not='all_reduce {{.*}}axes = ["tp"]'

#dp = #par.sharding<@mesh, [{"dp"}, {}, {}]>
#cols = #par.sharding<@mesh, [{}, {"tp"}]>
#rows = #par.sharding<@mesh, [{"tp"}, {}]>
#map3 = affine_map<(b, s, h) -> (b, s, h)>
#mapg = affine_map<(b, s, h) -> (h)>

// Tests a Megatron MLP between two residual-stream ops: the output of the
// row-parallel W2 (reduced over tp) enters the region through a reshard to
// the sequence split, the residual add and the row-wise scale run on
// [2, 8/2, 16] blocks (the split reaches the add's other operand, the
// block input, through a second reshard), the column-parallel W3's input
// leaves it through a reshard back to propagation's sharding. The
// LayerNorm-like parameter gradient (a sum over batch and sequence) reads
// the split values: it stays partial over tp and is reduced over dp and tp.
// CHECK-LABEL: func.func @block
// CHECK:         %[[X:.*]] = par.reshard %arg0 <@mesh, [{"dp"}, {"tp"}, {}]>
// CHECK:         linalg.matmul
// CHECK:         linalg.matmul
// CHECK:         %[[E:.*]] = tensor.expand_shape
// CHECK:         %[[ES:.*]] = par.reshard %[[E]] <@mesh, [{"dp"}, {"tp"}, {}]>
// The re-propagation splits the region ops' inits too.
// CHECK:         tensor.empty() {par.sharding = [#par.sharding<@mesh, [{"dp"}, {"tp"}, {}]>]}
// CHECK-NEXT:    %[[R:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[ES]] : {{.*}}) {{.*}}par.sharding = [#par.sharding<@mesh, [{"dp"}, {"tp"}, {}]>]
// CHECK:         %[[N:.*]] = linalg.generic {{.*}} ins(%[[R]], %arg3 : {{.*}}) {{.*}}par.sharding = [#par.sharding<@mesh, [{"dp"}, {"tp"}, {}]>]
// CHECK:         %[[G:.*]] = par.reshard %[[N]] <@mesh, [{"dp"}, {}, {}]>
// CHECK:         tensor.collapse_shape %[[G]]
// CHECK:         linalg.generic {{.*}} ins(%[[R]] : tensor<4x8x16xf32>)

// SPMD-LABEL: func.func @block
// SPMD:         par.all_slice %arg0 on @mesh axes = ["tp"] dim = 1 : tensor<2x8x16xf32> -> tensor<2x4x16xf32>
// SPMD:         par.reduce_scatter {{.*}} axes = ["tp"] dim = 1 kind = sum : tensor<2x8x16xf32> -> tensor<2x4x16xf32>
// SPMD:         par.all_gather {{.*}} axes = ["tp"] dim = 1 : tensor<2x4x16xf32> -> tensor<2x8x16xf32>
// SPMD:         par.all_reduce {{.*}} axes = ["dp", "tp"] kind = sum : tensor<16xf32>
par.mesh @mesh ["dp"=2, "tp"=2]
func.func @block(%x: tensor<4x8x16xf32> {par.sharding = #dp},
                 %w1: tensor<16x32xf32> {par.sharding = #cols},
                 %w2: tensor<32x16xf32> {par.sharding = #rows},
                 %g: tensor<16xf32>,
                 %w3: tensor<16x32xf32> {par.sharding = #cols})
    -> (tensor<32x32xf32>, tensor<16xf32>) {
  %c0 = arith.constant 0.0 : f32
  %c = tensor.collapse_shape %x [[0, 1], [2]] : tensor<4x8x16xf32> into tensor<32x16xf32>
  %e1 = tensor.empty() : tensor<32x32xf32>
  %z1 = linalg.fill ins(%c0 : f32) outs(%e1 : tensor<32x32xf32>) -> tensor<32x32xf32>
  %h = linalg.matmul ins(%c, %w1 : tensor<32x16xf32>, tensor<16x32xf32>) outs(%z1 : tensor<32x32xf32>) -> tensor<32x32xf32>
  %e2 = tensor.empty() : tensor<32x16xf32>
  %z2 = linalg.fill ins(%c0 : f32) outs(%e2 : tensor<32x16xf32>) -> tensor<32x16xf32>
  %o = linalg.matmul ins(%h, %w2 : tensor<32x32xf32>, tensor<32x16xf32>) outs(%z2 : tensor<32x16xf32>) -> tensor<32x16xf32>
  %oe = tensor.expand_shape %o [[0, 1], [2]] output_shape [4, 8, 16] : tensor<32x16xf32> into tensor<4x8x16xf32>
  %e3 = tensor.empty() : tensor<4x8x16xf32>
  %r = linalg.generic {indexing_maps = [#map3, #map3, #map3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %oe : tensor<4x8x16xf32>, tensor<4x8x16xf32>) outs(%e3 : tensor<4x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<4x8x16xf32>
  %e4 = tensor.empty() : tensor<4x8x16xf32>
  %n = linalg.generic {indexing_maps = [#map3, #mapg, #map3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%r, %g : tensor<4x8x16xf32>, tensor<16xf32>) outs(%e4 : tensor<4x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %s = arith.mulf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<4x8x16xf32>
  %c2 = tensor.collapse_shape %n [[0, 1], [2]] : tensor<4x8x16xf32> into tensor<32x16xf32>
  %e5 = tensor.empty() : tensor<32x32xf32>
  %z5 = linalg.fill ins(%c0 : f32) outs(%e5 : tensor<32x32xf32>) -> tensor<32x32xf32>
  %y = linalg.matmul ins(%c2, %w3 : tensor<32x16xf32>, tensor<16x32xf32>) outs(%z5 : tensor<32x32xf32>) -> tensor<32x32xf32>
  %e6 = tensor.empty() : tensor<16xf32>
  %z6 = linalg.fill ins(%c0 : f32) outs(%e6 : tensor<16xf32>) -> tensor<16xf32>
  %dg = linalg.generic {indexing_maps = [#map3, #mapg], iterator_types = ["reduction", "reduction", "parallel"]}
      ins(%r : tensor<4x8x16xf32>) outs(%z6 : tensor<16xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.addf %a, %out : f32
    linalg.yield %s : f32
  } -> tensor<16xf32>
  return %y, %dg : tensor<32x32xf32>, tensor<16xf32>
}

// RUN: par-opt %s --par-spmd=report=true -split-input-file | FileCheck %s

// The standard strategies need exactly the communication Megatron and ZeRO
// need, and nothing more. Each case pins the communication report and the
// key per-device types.

// Tests that a Megatron MLP (first weight split by columns over tp, second
// by rows) does one all_reduce of the b x h output and no all_gather.
// CHECK-LABEL: par-comm-report: @megatron_mlp
// CHECK-NEXT:    par.all_reduce axes=["tp"] n=4 f32 tensor<8x16xf32>: 768 bytes
// CHECK-NEXT:    total: 1 collectives, 768 bytes per device
// CHECK-LABEL: func.func @megatron_mlp
// CHECK-SAME:    tensor<16x16xf32> {par.global_type = tensor<16x64xf32>
// CHECK-SAME:    tensor<16x16xf32> {par.global_type = tensor<64x16xf32>
// CHECK-NOT:     par.all_gather
// CHECK:         %[[H:.*]] = linalg.matmul {{.*}} -> tensor<8x16xf32>
// CHECK:         math.tanh %[[H]] : tensor<8x16xf32>
// CHECK:         %[[Y:.*]] = linalg.matmul
// CHECK:         par.all_reduce %[[Y]] on @mesh axes = ["tp"] kind = sum : tensor<8x16xf32>
par.mesh @mesh ["tp"=4]
func.func @megatron_mlp(%x: tensor<8x16xf32>,
    %w1: tensor<16x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
    %w2: tensor<64x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> tensor<8x16xf32> {
  %c0 = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<8x64xf32>
  %f1 = linalg.fill ins(%c0 : f32) outs(%e1 : tensor<8x64xf32>) -> tensor<8x64xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<8x16xf32>, tensor<16x64xf32>) outs(%f1 : tensor<8x64xf32>) -> tensor<8x64xf32>
  %g = math.tanh %h : tensor<8x64xf32>
  %e2 = tensor.empty() : tensor<8x16xf32>
  %f2 = linalg.fill ins(%c0 : f32) outs(%e2 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %y = linalg.matmul ins(%g, %w2 : tensor<8x64xf32>, tensor<64x16xf32>) outs(%f2 : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// Tests that multi-head attention with heads split over tp (q/k/v weights by
// columns, output projection by rows) does one all_reduce, after the output
// projection: the reshape into heads carries the column split to the heads
// dimension.
// CHECK-LABEL: par-comm-report: @attention
// CHECK-NEXT:    par.all_reduce axes=["tp"] n=2 f32 tensor<16x32xf32>: 2048 bytes
// CHECK-NEXT:    total: 1 collectives, 2048 bytes per device
// CHECK-LABEL: func.func @attention
// CHECK:         tensor.expand_shape {{.*}} : tensor<16x16xf32> into tensor<16x2x8xf32>
// CHECK:         linalg.softmax dimension(2) ins({{.*}} : tensor<2x16x16xf32>)
// CHECK:         tensor.collapse_shape {{.*}} : tensor<16x2x8xf32> into tensor<16x16xf32>
// CHECK:         %[[O:.*]] = linalg.matmul ins({{.*}} : tensor<16x16xf32>, tensor<16x32xf32>)
// CHECK-NEXT:    par.all_reduce %[[O]] on @mesh axes = ["tp"]
par.mesh @mesh ["tp"=2]
#qk = affine_map<(h, s, t, d) -> (h, s, d)>
#kk = affine_map<(h, s, t, d) -> (h, t, d)>
#sc = affine_map<(h, s, t, d) -> (h, s, t)>
#pv_p = affine_map<(h, s, d, t) -> (h, s, t)>
#pv_v = affine_map<(h, s, d, t) -> (h, t, d)>
#pv_o = affine_map<(h, s, d, t) -> (h, s, d)>
func.func @attention(%x: tensor<16x32xf32>,
    %wq: tensor<32x32xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
    %wk: tensor<32x32xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
    %wv: tensor<32x32xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
    %wo: tensor<32x32xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> tensor<16x32xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x32xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %q = linalg.matmul ins(%x, %wq : tensor<16x32xf32>, tensor<32x32xf32>) outs(%z : tensor<16x32xf32>) -> tensor<16x32xf32>
  %k = linalg.matmul ins(%x, %wk : tensor<16x32xf32>, tensor<32x32xf32>) outs(%z : tensor<16x32xf32>) -> tensor<16x32xf32>
  %v = linalg.matmul ins(%x, %wv : tensor<16x32xf32>, tensor<32x32xf32>) outs(%z : tensor<16x32xf32>) -> tensor<16x32xf32>
  %q3 = tensor.expand_shape %q [[0], [1, 2]] output_shape [16, 4, 8] : tensor<16x32xf32> into tensor<16x4x8xf32>
  %k3 = tensor.expand_shape %k [[0], [1, 2]] output_shape [16, 4, 8] : tensor<16x32xf32> into tensor<16x4x8xf32>
  %v3 = tensor.expand_shape %v [[0], [1, 2]] output_shape [16, 4, 8] : tensor<16x32xf32> into tensor<16x4x8xf32>
  %eh = tensor.empty() : tensor<4x16x8xf32>
  %qh = linalg.transpose ins(%q3 : tensor<16x4x8xf32>) outs(%eh : tensor<4x16x8xf32>) permutation = [1, 0, 2]
  %kh = linalg.transpose ins(%k3 : tensor<16x4x8xf32>) outs(%eh : tensor<4x16x8xf32>) permutation = [1, 0, 2]
  %vh = linalg.transpose ins(%v3 : tensor<16x4x8xf32>) outs(%eh : tensor<4x16x8xf32>) permutation = [1, 0, 2]
  %es = tensor.empty() : tensor<4x16x16xf32>
  %zs = linalg.fill ins(%c0 : f32) outs(%es : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  %s = linalg.generic {indexing_maps = [#qk, #kk, #sc], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%qh, %kh : tensor<4x16x8xf32>, tensor<4x16x8xf32>) outs(%zs : tensor<4x16x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<4x16x16xf32>
  %p = linalg.softmax dimension(2) ins(%s : tensor<4x16x16xf32>) outs(%es : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  %zc = linalg.fill ins(%c0 : f32) outs(%eh : tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
  %ctx = linalg.generic {indexing_maps = [#pv_p, #pv_v, #pv_o], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%p, %vh : tensor<4x16x16xf32>, tensor<4x16x8xf32>) outs(%zc : tensor<4x16x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<4x16x8xf32>
  %eb = tensor.empty() : tensor<16x4x8xf32>
  %cb = linalg.transpose ins(%ctx : tensor<4x16x8xf32>) outs(%eb : tensor<16x4x8xf32>) permutation = [1, 0, 2]
  %c2 = tensor.collapse_shape %cb [[0], [1, 2]] : tensor<16x4x8xf32> into tensor<16x32xf32>
  %o = linalg.matmul ins(%c2, %wo : tensor<16x32xf32>, tensor<32x32xf32>) outs(%z : tensor<16x32xf32>) -> tensor<16x32xf32>
  return %o : tensor<16x32xf32>
}

// -----

// Tests data parallelism on a hand-written forward + backward + SGD step of a
// two-layer network: the batch is split over dp, weights are replicated.
// Each weight gradient gets an all_reduce over dp (and the scalar loss one);
// activations never move. The three reductions are independent until the
// SGD update, so par-bucket-reductions sends them as one bucket: one
// message of 3/2 * (4 + 2048 + 512) = 3846 bytes.
// CHECK-LABEL: par-comm-report: @dp_train_step
// CHECK-NEXT:    par.bucket_all_reduce axes=["dp"] n=4 f32 3 tensors: 3846 bytes
// CHECK-NEXT:    total: 1 collectives, 3846 bytes per device
// CHECK-LABEL: func.func @dp_train_step
// CHECK-SAME:    (%{{.*}}: tensor<16x16xf32> {par.global_type = tensor<64x16xf32>
// CHECK-NOT:     par.all_gather
// CHECK-NOT:     par.reduce_scatter
// CHECK:         par.bucket_all_reduce %{{.*}}, %{{.*}}, %{{.*}} on @mesh axes = ["dp"] kind = sum : tensor<f32>, tensor<32x4xf32>, tensor<16x32xf32>
// CHECK:         return {{.*}} : tensor<f32>, tensor<16x32xf32>, tensor<32x4xf32>
par.mesh @mesh ["dp"=4]
#map2 = affine_map<(i, j) -> (i, j)>
#red = affine_map<(i, j) -> ()>
func.func @dp_train_step(
    %x: tensor<64x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
    %t: tensor<64x4xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
    %w1: tensor<16x32xf32>, %w2: tensor<32x4xf32>)
    -> (tensor<f32>, tensor<16x32xf32>, tensor<32x4xf32>) {
  %c0 = arith.constant 0.0 : f32
  // Forward.
  %e1 = tensor.empty() : tensor<64x32xf32>
  %z1 = linalg.fill ins(%c0 : f32) outs(%e1 : tensor<64x32xf32>) -> tensor<64x32xf32>
  %a1 = linalg.matmul ins(%x, %w1 : tensor<64x16xf32>, tensor<16x32xf32>) outs(%z1 : tensor<64x32xf32>) -> tensor<64x32xf32>
  %h = math.tanh %a1 : tensor<64x32xf32>
  %e2 = tensor.empty() : tensor<64x4xf32>
  %z2 = linalg.fill ins(%c0 : f32) outs(%e2 : tensor<64x4xf32>) -> tensor<64x4xf32>
  %y = linalg.matmul ins(%h, %w2 : tensor<64x32xf32>, tensor<32x4xf32>) outs(%z2 : tensor<64x4xf32>) -> tensor<64x4xf32>
  %d = arith.subf %y, %t : tensor<64x4xf32>
  %sq = arith.mulf %d, %d : tensor<64x4xf32>
  %el = tensor.empty() : tensor<f32>
  %zl = linalg.fill ins(%c0 : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#map2, #red], iterator_types = ["reduction", "reduction"]}
      ins(%sq : tensor<64x4xf32>) outs(%zl : tensor<f32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  // Backward: dy = 2 (y - t) / N.
  %scale = arith.constant dense<0.0078125> : tensor<64x4xf32>
  %dy = arith.mulf %d, %scale : tensor<64x4xf32>
  %eht = tensor.empty() : tensor<32x64xf32>
  %ht = linalg.transpose ins(%h : tensor<64x32xf32>) outs(%eht : tensor<32x64xf32>) permutation = [1, 0]
  %eg2 = tensor.empty() : tensor<32x4xf32>
  %zg2 = linalg.fill ins(%c0 : f32) outs(%eg2 : tensor<32x4xf32>) -> tensor<32x4xf32>
  %gw2 = linalg.matmul ins(%ht, %dy : tensor<32x64xf32>, tensor<64x4xf32>) outs(%zg2 : tensor<32x4xf32>) -> tensor<32x4xf32>
  %ew2t = tensor.empty() : tensor<4x32xf32>
  %w2t = linalg.transpose ins(%w2 : tensor<32x4xf32>) outs(%ew2t : tensor<4x32xf32>) permutation = [1, 0]
  %dh = linalg.matmul ins(%dy, %w2t : tensor<64x4xf32>, tensor<4x32xf32>) outs(%z1 : tensor<64x32xf32>) -> tensor<64x32xf32>
  %one = arith.constant dense<1.0> : tensor<64x32xf32>
  %h2 = arith.mulf %h, %h : tensor<64x32xf32>
  %dt = arith.subf %one, %h2 : tensor<64x32xf32>
  %da1 = arith.mulf %dh, %dt : tensor<64x32xf32>
  %ext = tensor.empty() : tensor<16x64xf32>
  %xt = linalg.transpose ins(%x : tensor<64x16xf32>) outs(%ext : tensor<16x64xf32>) permutation = [1, 0]
  %eg1 = tensor.empty() : tensor<16x32xf32>
  %zg1 = linalg.fill ins(%c0 : f32) outs(%eg1 : tensor<16x32xf32>) -> tensor<16x32xf32>
  %gw1 = linalg.matmul ins(%xt, %da1 : tensor<16x64xf32>, tensor<64x32xf32>) outs(%zg1 : tensor<16x32xf32>) -> tensor<16x32xf32>
  // SGD.
  %lr1 = arith.constant dense<0.1> : tensor<16x32xf32>
  %u1 = arith.mulf %gw1, %lr1 : tensor<16x32xf32>
  %nw1 = arith.subf %w1, %u1 : tensor<16x32xf32>
  %lr2 = arith.constant dense<0.1> : tensor<32x4xf32>
  %u2 = arith.mulf %gw2, %lr2 : tensor<32x4xf32>
  %nw2 = arith.subf %w2, %u2 : tensor<32x4xf32>
  return %loss, %nw1, %nw2 : tensor<f32>, tensor<16x32xf32>, tensor<32x4xf32>
}

// -----

// Tests ZeRO-style data parallelism: the same step with the weight gradients
// constrained to be split over dp. Gradients are reduce_scattered instead of
// all_reduced, each device updates its shard of the (replicated) weights,
// and the updated weights are all_gathered back as the results ask.
// CHECK-LABEL: par-comm-report: @zero_train_step
// CHECK-DAG:     par.all_reduce axes=["dp"] n=4 f32 tensor<f32>: 6 bytes
// CHECK-DAG:     par.reduce_scatter axes=["dp"] n=4 f32 tensor<16x32xf32>: 1536 bytes
// CHECK-DAG:     par.reduce_scatter axes=["dp"] n=4 f32 tensor<32x4xf32>: 384 bytes
// CHECK-DAG:     par.all_gather axes=["dp"] n=4 f32 tensor<4x32xf32>: 1536 bytes
// CHECK-DAG:     par.all_gather axes=["dp"] n=4 f32 tensor<8x4xf32>: 384 bytes
// CHECK:         total: 5 collectives, 3846 bytes per device
// CHECK-LABEL: func.func @zero_train_step
// CHECK-NOT:     par.all_reduce {{.*}} tensor<16x32xf32>
// CHECK:         par.reduce_scatter %{{.*}} on @mesh axes = ["dp"] dim = 0 kind = sum : tensor<16x32xf32> -> tensor<4x32xf32>
// CHECK:         arith.subf %{{.*}}, %{{.*}} : tensor<4x32xf32>
par.mesh @mesh ["dp"=4]
#map2 = affine_map<(i, j) -> (i, j)>
#red = affine_map<(i, j) -> ()>
func.func @zero_train_step(
    %x: tensor<64x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
    %t: tensor<64x4xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
    %w1: tensor<16x32xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>},
    %w2: tensor<32x4xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>})
    -> (tensor<f32>, tensor<16x32xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>},
        tensor<32x4xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}) {
  %c0 = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<64x32xf32>
  %z1 = linalg.fill ins(%c0 : f32) outs(%e1 : tensor<64x32xf32>) -> tensor<64x32xf32>
  %a1 = linalg.matmul ins(%x, %w1 : tensor<64x16xf32>, tensor<16x32xf32>) outs(%z1 : tensor<64x32xf32>) -> tensor<64x32xf32>
  %h = math.tanh %a1 : tensor<64x32xf32>
  %e2 = tensor.empty() : tensor<64x4xf32>
  %z2 = linalg.fill ins(%c0 : f32) outs(%e2 : tensor<64x4xf32>) -> tensor<64x4xf32>
  %y = linalg.matmul ins(%h, %w2 : tensor<64x32xf32>, tensor<32x4xf32>) outs(%z2 : tensor<64x4xf32>) -> tensor<64x4xf32>
  %d = arith.subf %y, %t : tensor<64x4xf32>
  %sq = arith.mulf %d, %d : tensor<64x4xf32>
  %el = tensor.empty() : tensor<f32>
  %zl = linalg.fill ins(%c0 : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#map2, #red], iterator_types = ["reduction", "reduction"]}
      ins(%sq : tensor<64x4xf32>) outs(%zl : tensor<f32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %scale = arith.constant dense<0.0078125> : tensor<64x4xf32>
  %dy = arith.mulf %d, %scale : tensor<64x4xf32>
  %eht = tensor.empty() : tensor<32x64xf32>
  %ht = linalg.transpose ins(%h : tensor<64x32xf32>) outs(%eht : tensor<32x64xf32>) permutation = [1, 0]
  %eg2 = tensor.empty() : tensor<32x4xf32>
  %zg2 = linalg.fill ins(%c0 : f32) outs(%eg2 : tensor<32x4xf32>) -> tensor<32x4xf32>
  %gw2r = linalg.matmul ins(%ht, %dy : tensor<32x64xf32>, tensor<64x4xf32>) outs(%zg2 : tensor<32x4xf32>) -> tensor<32x4xf32>
  %gw2 = par.sharding_constraint %gw2r <@mesh, [{"dp"}, {}]> : tensor<32x4xf32>
  %ew2t = tensor.empty() : tensor<4x32xf32>
  %w2t = linalg.transpose ins(%w2 : tensor<32x4xf32>) outs(%ew2t : tensor<4x32xf32>) permutation = [1, 0]
  %dh = linalg.matmul ins(%dy, %w2t : tensor<64x4xf32>, tensor<4x32xf32>) outs(%z1 : tensor<64x32xf32>) -> tensor<64x32xf32>
  %one = arith.constant dense<1.0> : tensor<64x32xf32>
  %h2 = arith.mulf %h, %h : tensor<64x32xf32>
  %dt = arith.subf %one, %h2 : tensor<64x32xf32>
  %da1 = arith.mulf %dh, %dt : tensor<64x32xf32>
  %ext = tensor.empty() : tensor<16x64xf32>
  %xt = linalg.transpose ins(%x : tensor<64x16xf32>) outs(%ext : tensor<16x64xf32>) permutation = [1, 0]
  %eg1 = tensor.empty() : tensor<16x32xf32>
  %zg1 = linalg.fill ins(%c0 : f32) outs(%eg1 : tensor<16x32xf32>) -> tensor<16x32xf32>
  %gw1r = linalg.matmul ins(%xt, %da1 : tensor<16x64xf32>, tensor<64x32xf32>) outs(%zg1 : tensor<16x32xf32>) -> tensor<16x32xf32>
  %gw1 = par.sharding_constraint %gw1r <@mesh, [{"dp"}, {}]> : tensor<16x32xf32>
  %lr1 = arith.constant dense<0.1> : tensor<16x32xf32>
  %u1 = arith.mulf %gw1, %lr1 : tensor<16x32xf32>
  %nw1 = arith.subf %w1, %u1 : tensor<16x32xf32>
  %lr2 = arith.constant dense<0.1> : tensor<32x4xf32>
  %u2 = arith.mulf %gw2, %lr2 : tensor<32x4xf32>
  %nw2 = arith.subf %w2, %u2 : tensor<32x4xf32>
  return %loss, %nw1, %nw2 : tensor<f32>, tensor<16x32xf32>, tensor<32x4xf32>
}

// -----

// Tests a 2-D mesh doing both: the batch over dp and Megatron's split over
// tp. The only collective is the tp all_reduce of the local batch's output.
// CHECK-LABEL: par-comm-report: @dp_tp_mlp
// CHECK-NEXT:    par.all_reduce axes=["tp"] n=4 f32 tensor<4x16xf32>: 384 bytes
// CHECK-NEXT:    total: 1 collectives, 384 bytes per device
// CHECK-LABEL: func.func @dp_tp_mlp
// CHECK-SAME:    (%{{.*}}: tensor<4x16xf32> {{.*}}, %{{.*}}: tensor<16x16xf32> {{.*}}, %{{.*}}: tensor<16x16xf32> {{.*}}) -> (tensor<4x16xf32>
par.mesh @mesh ["dp"=2, "tp"=4]
func.func @dp_tp_mlp(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
    %w1: tensor<16x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
    %w2: tensor<64x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> tensor<8x16xf32> {
  %c0 = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<8x64xf32>
  %f1 = linalg.fill ins(%c0 : f32) outs(%e1 : tensor<8x64xf32>) -> tensor<8x64xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<8x16xf32>, tensor<16x64xf32>) outs(%f1 : tensor<8x64xf32>) -> tensor<8x64xf32>
  %g = math.tanh %h : tensor<8x64xf32>
  %e2 = tensor.empty() : tensor<8x16xf32>
  %f2 = linalg.fill ins(%c0 : f32) outs(%e2 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %y = linalg.matmul ins(%g, %w2 : tensor<8x64xf32>, tensor<64x16xf32>) outs(%f2 : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

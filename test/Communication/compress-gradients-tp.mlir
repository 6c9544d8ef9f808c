// Tests par-compress-gradients' buckets on dp x tp: every decompressed value
// depends on its whole bucket (the chunk scales, top-k's threshold), so a
// bucket never mixes gradients that differ over other mesh axes than the
// reduced ones. The gradients replicated over "tp" (16, 12 and an all_gather
// over "tp" of 16) form one bucket of 44 padded to 48, the tp-split ones (two
// call results and a stage-update style argument, 8 each) another of 24
// padded to 32, whatever their program order; a gradient whose variation is
// not known (computed by a call inside a region) is a bucket alone (8
// padded to 16). Each bucket is exchanged at its last member, in that order,
// with its own two error-feedback buffers.
// Bytes: 1.5 * (48 + 32 + 16) = 144 (each bucket (1/2)(P + P/8 * 4) in each
// phase); uncompressed 4 * 76 = 304.
// RUN: par-opt %s "--par-compress-gradients=method=int8 chunk=8" | FileCheck %s --check-prefix=INT8
// RUN: par-opt %s "--par-compress-gradients=method=topk ratio=0.25" | FileCheck %s --check-prefix=TOPK
// RUN: par-opt %S/Inputs/compress-tp1.mlir "--par-compress-gradients=method=int8 chunk=8" | FileCheck %s --check-prefix=TP1

par.mesh @mesh ["dp"=2, "tp"=2]

func.func private @f(%x: tensor<4x8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %w: tensor<16xf32> {par.param}) -> tensor<f32>

// The backward: replicated and tp-split partial gradients.
func.func private @g(%x: tensor<2x8xf32>)
    -> (tensor<f32> {par.sharding = #par.sharding<@mesh, [], partial sum {"dp"}>},
        tensor<16xf32> {par.sharding = #par.sharding<@mesh, [{}], partial sum {"dp"}>},
        tensor<8xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}], partial sum {"dp"}>},
        tensor<12xf32> {par.sharding = #par.sharding<@mesh, [{}], partial sum {"dp"}>},
        tensor<8xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}], partial sum {"dp"}>})
func.func private @g2(%x: tensor<2x8xf32>) -> (tensor<8xf32> {par.sharding = #par.sharding<@mesh, [{}], partial sum {"dp"}>})

func.func @f_step(%x: tensor<2x8xf32>,
                  %h: tensor<8xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}], partial sum {"dp"}>})
    -> (tensor<f32>, tensor<16xf32>, tensor<8xf32>, tensor<12xf32>, tensor<8xf32>, tensor<16xf32>, tensor<8xf32>, tensor<8xf32>)
    attributes {par.feedback = array<i64: 2, 1>} {
  %g:5 = call @g(%x) : (tensor<2x8xf32>) -> (tensor<f32>, tensor<16xf32>, tensor<8xf32>, tensor<12xf32>, tensor<8xf32>)
  %l = par.all_reduce %g#0 on @mesh axes = ["dp"] kind = sum : tensor<f32>
  %r1 = par.all_reduce %g#1 on @mesh axes = ["dp"] kind = sum : tensor<16xf32>
  %r2 = par.all_reduce %g#2 on @mesh axes = ["dp"] kind = sum : tensor<8xf32>
  %r3 = par.all_reduce %g#3 on @mesh axes = ["dp"] kind = sum : tensor<12xf32>
  %r4 = par.all_reduce %g#4 on @mesh axes = ["dp"] kind = sum : tensor<8xf32>
  %a = par.all_gather %g#4 on @mesh axes = ["tp"] dim = 0 : tensor<8xf32> -> tensor<16xf32>
  %r5 = par.all_reduce %a on @mesh axes = ["dp"] kind = sum : tensor<16xf32>
  %r6 = par.all_reduce %h on @mesh axes = ["dp"] kind = sum : tensor<8xf32>
  %u = scf.execute_region -> tensor<8xf32> {
    %v = func.call @g2(%x) : (tensor<2x8xf32>) -> tensor<8xf32>
    scf.yield %v : tensor<8xf32>
  }
  %r7 = par.all_reduce %u on @mesh axes = ["dp"] kind = sum : tensor<8xf32>
  return %l, %r1, %r2, %r3, %r4, %r5, %r6, %r7 : tensor<f32>, tensor<16xf32>, tensor<8xf32>, tensor<12xf32>, tensor<8xf32>, tensor<16xf32>, tensor<8xf32>, tensor<8xf32>
}

// INT8-LABEL: func.func @f_step
// INT8-SAME: %arg2: tensor<1x48xf32> {par.error_feedback
// INT8-SAME: %arg3: tensor<1x24xf32> {par.error_feedback
// INT8-SAME: %arg4: tensor<1x32xf32> {par.error_feedback
// INT8-SAME: %arg5: tensor<1x16xf32> {par.error_feedback
// INT8-SAME: %arg6: tensor<1x16xf32> {par.error_feedback
// INT8-SAME: %arg7: tensor<1x8xf32> {par.error_feedback
// INT8-SAME: par.compression = {compressed_bytes = 1.440000e+02 : f64, method = "int8", uncompressed_bytes = 3.040000e+02 : f64}
// INT8:      %[[G:.*]]:5 = call @g
// INT8:      %[[A:.*]] = par.all_gather %[[G]]#4 on @mesh axes = ["tp"]
// The tp-replicated bucket, at its last member (the all_gather's).
// INT8:      tensor.insert_slice %[[G]]#1 into %{{.*}}[0] [16] [1] : tensor<16xf32> into tensor<48xf32>
// INT8-NEXT: tensor.insert_slice %[[G]]#3 into %{{.*}}[16] [12] [1] : tensor<12xf32> into tensor<48xf32>
// INT8-NEXT: tensor.insert_slice %[[A]] into %{{.*}}[28] [16] [1] : tensor<16xf32> into tensor<48xf32>
// INT8-NOT:  insert_slice %[[G]]#{{[24]}}
// INT8:      par.all_to_all %{{.*}} : tensor<2x24xi8> -> tensor<1x48xi8>
// INT8:      par.all_gather %{{.*}} : tensor<24xi8> -> tensor<48xi8>
// The tp-split bucket.
// INT8:      tensor.insert_slice %[[G]]#2 into %{{.*}}[0] [8] [1] : tensor<8xf32> into tensor<32xf32>
// INT8-NEXT: tensor.insert_slice %[[G]]#4 into %{{.*}}[8] [8] [1] : tensor<8xf32> into tensor<32xf32>
// INT8-NEXT: tensor.insert_slice %arg1 into %{{.*}}[16] [8] [1] : tensor<8xf32> into tensor<32xf32>
// INT8:      par.all_to_all %{{.*}} : tensor<2x16xi8> -> tensor<1x32xi8>
// INT8:      par.all_gather %{{.*}} : tensor<16xi8> -> tensor<32xi8>
// Unknown variation: alone.
// INT8:      %[[U:.*]] = scf.execute_region
// INT8:      tensor.insert_slice %[[U]] into %{{.*}}[0] [8] [1] : tensor<8xf32> into tensor<16xf32>
// INT8:      par.all_to_all %{{.*}} : tensor<2x8xi8> -> tensor<1x16xi8>
// INT8-NOT:  par.all_reduce {{.*}}axes = ["dp"] kind = sum : tensor<{{[0-9]+}}xf32>
// INT8:      return

// Top-k: the same buckets, unpadded (44, 24 and 8 elements; k = 11, 6, 2).
// TOPK:      %[[G:.*]]:5 = call @g
// TOPK:      tensor.insert_slice %[[G]]#1 into %{{.*}}[0] [16] [1] : tensor<16xf32> into tensor<44xf32>
// TOPK:      par.all_gather %{{.*}} : tensor<11xf32> -> tensor<22xf32>
// TOPK:      tensor.insert_slice %[[G]]#2 into %{{.*}}[0] [8] [1] : tensor<8xf32> into tensor<24xf32>
// TOPK:      par.all_gather %{{.*}} : tensor<6xf32> -> tensor<12xf32>
// TOPK:      par.all_gather %{{.*}} : tensor<2xf32> -> tensor<4xf32>

// A mesh axis of size 1 has no replicas: on dp=2 x tp=1 the replicated and
// the tp-split gradient share one bucket (16 + 8 = 24, padded to 32).
// TP1:      %[[G:.*]]:2 = call @g
// TP1:      tensor.insert_slice %[[G]]#0 into %{{.*}}[0] [16] [1] : tensor<16xf32> into tensor<32xf32>
// TP1-NEXT: tensor.insert_slice %[[G]]#1 into %{{.*}}[16] [8] [1] : tensor<8xf32> into tensor<32xf32>
// TP1-COUNT-2: par.all_to_all
// TP1-NOT:  par.all_to_all
// TP1:      return

// Tests par-compress-gradients on a partitioned train step: the two
// data-parallel gradient reductions (8x12 and 12 elements) become one
// bucket of 108 elements padded to 112 (n * chunk = 16), exchanged as int8
// codes and scales in two phases (all_to_all, owned sum, all_gather) with two
// error-feedback buffers (state: appended arguments and results, fed back,
// one row per device over dp x tp); the loss's and the tp reduction stay.
// Bytes by the ring formulas: all_to_all (1/2)(112 + 14*4) + all_gather
// (1/2)(112 + 14*4) = 168; uncompressed 2*(1/2)*(96 + 12)*4 = 432.
// RUN: par-opt %s "--par-compress-gradients=method=int8 chunk=8" | FileCheck %s --check-prefix=INT8
// RUN: par-opt %s "--par-compress-gradients=method=sign chunk=8" | FileCheck %s --check-prefix=SIGN
// RUN: par-opt %s "--par-compress-gradients=method=topk ratio=0.05" | FileCheck %s --check-prefix=TOPK
// RUN: par-opt %s "--par-compress-gradients=method=int8 chunk=8 error-feedback=false min-elements=20" | FileCheck %s --check-prefix=NOEF
// RUN: par-opt %s "--par-compress-gradients=method=int8 chunk=8 bucket-bytes=0" | FileCheck %s --check-prefix=ALONE
// RUN: par-opt %s "--par-compress-gradients=method=int8 chunk=8 warmup=3" | FileCheck %s --check-prefix=WARM
// Bad options and programs: a diagnostic naming the option or the op.
// RUN: not par-opt %s "--par-compress-gradients=method=fp4" 2>&1 | FileCheck %s --check-prefix=METHOD
// RUN: not par-opt %s "--par-compress-gradients=method=topk ratio=1.5" 2>&1 | FileCheck %s --check-prefix=RATIO
// RUN: not par-opt %s "--par-compress-gradients=method=topk ratio=0" 2>&1 | FileCheck %s --check-prefix=RATIO0
// RUN: not par-opt %s "--par-compress-gradients=method=int8 chunk=0" 2>&1 | FileCheck %s --check-prefix=CHUNK
// RUN: not par-opt %s "--par-compress-gradients=method=sign chunk=12" 2>&1 | FileCheck %s --check-prefix=CHUNK8
// RUN: not par-opt %s "--par-compress-gradients=method=int8 min-elements=1000" 2>&1 | FileCheck %s --check-prefix=NONE
// RUN: not par-opt %S/Inputs/compress-no-dp.mlir --par-compress-gradients 2>&1 | FileCheck %s --check-prefix=NODP
// RUN: not par-opt %S/Inputs/compress-no-step.mlir --par-compress-gradients 2>&1 | FileCheck %s --check-prefix=NOSTEP

par.mesh @mesh ["dp"=2, "tp"=2]

// The forward: its data argument splits dim 0 over "dp".
func.func private @f(%x: tensor<4x8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
                     %w: tensor<8x12xf32> {par.param}, %b: tensor<12xf32> {par.param}) -> tensor<f32>

func.func @f_step(%x: tensor<2x8xf32>, %w: tensor<8x12xf32>, %b: tensor<12xf32>, %gw: tensor<8x12xf32>, %gb: tensor<12xf32>, %l: tensor<f32>, %h: tensor<12xf32>)
    -> (tensor<f32>, tensor<8x12xf32>, tensor<12xf32>, tensor<12xf32>) attributes {par.feedback = array<i64: 1, 1, 2, 2>} {
  %rw = par.all_reduce %gw on @mesh axes = ["dp"] kind = sum : tensor<8x12xf32>
  %rb = par.all_reduce %gb on @mesh axes = ["dp"] kind = sum : tensor<12xf32>
  %rl = par.all_reduce %l on @mesh axes = ["dp"] kind = sum : tensor<f32>
  %rh = par.all_reduce %h on @mesh axes = ["tp"] kind = sum : tensor<12xf32>
  return %rl, %rw, %rb, %rh : tensor<f32>, tensor<8x12xf32>, tensor<12xf32>, tensor<12xf32>
}

// INT8-LABEL: func.func @f_step
// INT8-SAME: %arg7: tensor<1x112xf32> {par.error_feedback, par.global_type = tensor<4x112xf32>, par.init = #par.init<zeros>, par.sharding = #par.sharding<@mesh, [{"dp", "tp"}, {}]>}
// INT8-SAME: %arg8: tensor<1x56xf32> {par.error_feedback, par.global_type = tensor<4x56xf32>
// INT8-SAME: -> (tensor<f32>, tensor<8x12xf32>, tensor<12xf32>, tensor<12xf32>, tensor<1x112xf32> {{.*}}, tensor<1x56xf32>
// INT8-SAME: par.compression = {compressed_bytes = 1.680000e+02 : f64, method = "int8", uncompressed_bytes = 4.320000e+02 : f64}
// INT8-SAME: par.feedback = array<i64: 1, 1, 2, 2, 4, 7, 5, 8>
// INT8-NOT:  par.all_reduce {{.*}}tensor<8x12xf32>
// INT8:      tensor.insert_slice %{{.*}} into %{{.*}}[0] [96] [1]
// INT8:      tensor.insert_slice %arg4 into %{{.*}}[96] [12] [1]
// INT8:      arith.maximumf
// INT8:      math.roundeven
// INT8:      arith.fptosi %{{.*}} : f32 to i8
// INT8:      par.all_to_all %{{.*}} on @mesh axes = ["dp"] split_dim = 0 concat_dim = 1 : tensor<2x56xi8> -> tensor<1x112xi8>
// INT8:      par.all_to_all %{{.*}} on @mesh axes = ["dp"] split_dim = 0 concat_dim = 1 : tensor<2x7xf32> -> tensor<1x14xf32>
// INT8:      par.all_gather %{{.*}} on @mesh axes = ["dp"] dim = 0 : tensor<56xi8> -> tensor<112xi8>
// INT8:      par.all_gather %{{.*}} on @mesh axes = ["dp"] dim = 0 : tensor<7xf32> -> tensor<14xf32>
// INT8-DAG:  par.all_reduce %arg5 on @mesh axes = ["dp"] kind = sum : tensor<f32>
// INT8-DAG:  par.all_reduce %arg6 on @mesh axes = ["tp"] kind = sum : tensor<12xf32>
// INT8:      return

// Sign: 8 signs per byte (a chunk of 8 is one byte), scales mean|x|:
// 2 * (1/2)(14 + 14*4) = 70 bytes.
// SIGN:      compressed_bytes = 7.000000e+01 : f64, method = "sign"
// SIGN:      arith.cmpf oge
// SIGN:      arith.shli
// SIGN:      par.all_to_all %{{.*}} : tensor<2x7xi8> -> tensor<1x14xi8>
// SIGN:      par.all_gather %{{.*}} : tensor<7xi8> -> tensor<14xi8>

// Top-k: k = ceil(0.05 * 108) = 6 values and indices, one buffer of 108.
// (n - 1) * 6 * 8 = 48 bytes.
// TOPK:      %arg7: tensor<1x108xf32> {par.error_feedback
// TOPK-SAME: compressed_bytes = 4.800000e+01 : f64, method = "topk"
// TOPK:      arith.bitcast %{{.*}} : f32 to i32
// TOPK:      scf.for
// TOPK:      scf.for
// TOPK:      scf.if
// TOPK:      par.all_gather %{{.*}} : tensor<6xf32> -> tensor<12xf32>
// TOPK:      par.all_gather %{{.*}} : tensor<6xi32> -> tensor<12xi32>

// Without error feedback no state is added; min-elements keeps the 12-element
// gradient uncompressed.
// NOEF:      func.func @f_step(%arg0: tensor<2x8xf32>, %arg1: tensor<8x12xf32>, %arg2: tensor<12xf32>, %arg3: tensor<8x12xf32>, %arg4: tensor<12xf32>, %arg5: tensor<f32>, %arg6: tensor<12xf32>) ->
// NOEF-SAME: par.feedback = array<i64: 1, 1, 2, 2>
// NOEF:      par.all_to_all %{{.*}} : tensor<2x48xi8> -> tensor<1x96xi8>
// NOEF:      par.all_reduce %arg4 on @mesh axes = ["dp"]

// bucket-bytes=0: one exchange per gradient, two buffers each.
// ALONE:     %arg10: tensor<1x8xf32> {par.error_feedback
// ALONE-SAME: par.feedback = array<i64: 1, 1, 2, 2, 4, 7, 5, 8, 6, 9, 7, 10>
// ALONE-COUNT-2: par.all_to_all {{.*}}i8>

// Warm-up: a step counter as state (after the buffers); for 3 steps the
// bucket is all-reduced as it is, the buffers passed through.
// WARM:      %arg7: tensor<f32> {par.compression_step, par.global_type = tensor<f32>, par.init = #par.init<zeros>, par.sharding = #par.sharding<@mesh, []>}
// WARM-SAME: par.feedback = array<i64: 1, 1, 2, 2, 4, 8, 5, 9, 6, 7>
// WARM:      %[[C:.*]] = tensor.extract %arg7[] : tensor<f32>
// WARM:      %[[W:.*]] = arith.cmpf olt, %[[C]], %{{.*}} : f32
// WARM:      scf.if %[[W]] -> (tensor<112xf32>, tensor<112xf32>, tensor<56xf32>)
// WARM-NEXT:   par.all_reduce %{{.*}} on @mesh axes = ["dp"] kind = sum : tensor<112xf32>
// WARM:      } else {
// WARM:        par.all_to_all
// WARM:      arith.addf %{{.*}}, %{{.*}} : f32

// METHOD: par-compress-gradients: unknown method 'fp4' (option method, par-compile's compress: int8, sign or topk)
// RATIO: par-compress-gradients: ratio=1.5 is outside (0, 1)
// RATIO0: par-compress-gradients: ratio=0 is outside (0, 1)
// CHUNK: par-compress-gradients: chunk=0 must be positive
// CHUNK8: par-compress-gradients: chunk=12 must be a multiple of 8 for method=sign
// NONE: 'func.func' op has no data-parallel gradient reduction to compress (par-compress-gradients method=int8)
// NODP: par-compress-gradients: the program has no data-parallel axis
// NOSTEP: par-compress-gradients: the program has no train step

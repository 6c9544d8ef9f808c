// RUN: par-opt %s --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" --par-collectives-to-runtime -split-input-file -verify-diagnostics | FileCheck %s --implicit-check-not=par.buffer_

// Tests that each collective, bufferized into a fresh contiguous buffer,
// becomes one call into the runtime's kernel ABI with the block sizes of the
// header's packing conventions (axes code: byte k = axis index + 1).

// CHECK-LABEL: func.func @all_reduce
// CHECK:         %[[OUT:.*]] = memref.alloc() : memref<8x16xf32>
// CHECK-DAG:     %[[COUNT:.*]] = arith.constant 128 : i64
// CHECK-DAG:     %[[F32:.*]] = arith.constant 0 : i32
// CHECK-DAG:     %[[MAX:.*]] = arith.constant 1 : i32
// CHECK-DAG:     %[[AXES:.*]] = arith.constant 513 : i64
// CHECK:         call @par_rt_k_all_reduce(%{{.*}}, %{{.*}}, %[[COUNT]], %[[F32]], %[[MAX]], %[[AXES]])
// CHECK:         return %[[OUT]]
par.mesh @mesh ["x"=2, "y"=4]
func.func @all_reduce(%a: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = par.all_reduce %a on @mesh axes = ["x", "y"] kind = max : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests all_gather along dim 1 of a 2x3x4 input: C = 2, D = 3*4, axis y is
// index 1 (code 2).
// CHECK-LABEL: func.func @all_gather
// CHECK:         memref.alloc() : memref<2x12x4xbf16>
// CHECK-DAG:     %[[C:.*]] = arith.constant 2 : i64
// CHECK-DAG:     %[[D:.*]] = arith.constant 12 : i64
// CHECK-DAG:     %[[BF16:.*]] = arith.constant 3 : i32
// CHECK:         call @par_rt_k_all_gather(%{{.*}}, %{{.*}}, %[[C]], %[[D]], %[[BF16]], %{{.*}})
par.mesh @mesh ["x"=2, "y"=4]
func.func @all_gather(%a: tensor<2x3x4xbf16>) -> tensor<2x12x4xbf16> {
  %0 = par.all_gather %a on @mesh axes = ["y"] dim = 1 : tensor<2x3x4xbf16> -> tensor<2x12x4xbf16>
  return %0 : tensor<2x12x4xbf16>
}

// -----

// Tests reduce_scatter, all_to_all and all_slice block sizes.
// CHECK-LABEL: func.func @blocks
// CHECK:         call @par_rt_k_reduce_scatter(%{{.*}}, %{{.*}}, %c8_i64, %c4_i64, %c0_i32, %c0_i32{{.*}}, %c2_i64)
// CHECK:         call @par_rt_k_all_to_all(%{{.*}}, %{{.*}}, %c8_i64{{.*}}, %c4_i64{{.*}}, %c1_i64, %c32_i64, %c0_i32{{.*}}, %c2_i64{{.*}})
// CHECK:         call @par_rt_k_all_slice(%{{.*}}, %{{.*}}, %c8_i64{{.*}}, %c4_i64{{.*}}, %c0_i32{{.*}}, %c2_i64{{.*}})
par.mesh @mesh ["x"=2, "y"=4]
func.func @blocks(%a: tensor<8x16xf32>) -> (tensor<8x4xf32>, tensor<32x4xf32>, tensor<8x4xf32>) {
  %0 = par.reduce_scatter %a on @mesh axes = ["y"] dim = 1 kind = sum : tensor<8x16xf32> -> tensor<8x4xf32>
  %1 = par.all_to_all %a on @mesh axes = ["y"] split_dim = 1 concat_dim = 0 : tensor<8x16xf32> -> tensor<32x4xf32>
  %2 = par.all_slice %a on @mesh axes = ["y"] dim = 1 : tensor<8x16xf32> -> tensor<8x4xf32>
  return %0, %1, %2 : tensor<8x4xf32>, tensor<32x4xf32>, tensor<8x4xf32>
}

// -----

// Tests broadcast (root index within the group), send and recv (peer
// coordinates 16 bits per axis, tag).
// CHECK-LABEL: func.func @p2p
// CHECK:         call @par_rt_k_broadcast(%{{.*}}, %{{.*}}, %c16_i64, %c0_i32, %c6_i64, %c513_i64)
// CHECK:         call @par_rt_k_send(%{{.*}}, %c16_i64{{.*}}, %c0_i32{{.*}}, %c2_i64, %c3_i64, %c7_i64)
// CHECK:         %[[R:.*]] = memref.alloc() : memref<16xf32>
// CHECK:         call @par_rt_k_recv(%{{.*}}, %c16_i64{{.*}}, %c0_i32{{.*}}, %c2_i64{{.*}}, %c1_i64, %c0_i64)
par.mesh @mesh ["x"=2, "y"=4]
func.func @p2p(%a: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %0 = par.broadcast %a on @mesh axes = ["x", "y"] root = [1, 2] : tensor<16xf32>
  par.send %a on @mesh axes = ["y"] dest = [3] {tag = 7} : tensor<16xf32>
  %1 = par.recv on @mesh axes = ["y"] source = [1] : tensor<16xf32>
  return %0, %1 : tensor<16xf32>, tensor<16xf32>
}

// -----

// Tests that a bucket becomes one call with its members as (in, out, count)
// i64 triples in a stack array allocated once at the function's entry: two
// members (32 and 4 elements, fresh outputs), f32 (0), sum (0), axes y (2).
// CHECK-LABEL: func.func @bucket
// CHECK:         %[[M:.*]] = memref.alloca() : memref<6xi64>
// CHECK:         %[[OA:.*]] = memref.alloc() : memref<8x4xf32>
// CHECK:         %[[OB:.*]] = memref.alloc() : memref<4xf32>
// CHECK-DAG:     memref.store %{{.*}}, %[[M]][%c0] : memref<6xi64>
// CHECK-DAG:     memref.store %{{.*}}, %[[M]][%c1] : memref<6xi64>
// CHECK-DAG:     memref.store %c32_i64, %[[M]][%c2] : memref<6xi64>
// CHECK-DAG:     memref.store %{{.*}}, %[[M]][%c3] : memref<6xi64>
// CHECK-DAG:     memref.store %{{.*}}, %[[M]][%c4] : memref<6xi64>
// CHECK-DAG:     memref.store %c4_i64, %[[M]][%c5] : memref<6xi64>
// CHECK:         %[[P:.*]] = memref.extract_aligned_pointer_as_index %[[M]]
// CHECK:         %[[ADDR:.*]] = arith.index_cast %[[P]] : index to i64
// CHECK:         call @par_rt_k_bucket_all_reduce(%[[ADDR]], %c2_i64, %c0_i32, %c0_i32{{.*}}, %c2_i64{{.*}}) : (i64, i64, i32, i32, i64) -> ()
// CHECK:         return %[[OA]], %[[OB]]
par.mesh @mesh ["x"=2, "y"=4]
func.func @bucket(%a: tensor<8x4xf32>, %b: tensor<4xf32>) -> (tensor<8x4xf32>, tensor<4xf32>) {
  %0:2 = par.bucket_all_reduce %a, %b on @mesh axes = ["y"] kind = sum : tensor<8x4xf32>, tensor<4xf32>
  return %0#0, %0#1 : tensor<8x4xf32>, tensor<4xf32>
}

// -----

// Tests that a started all-reduce returns the runtime's request handle,
// which the wait passes back (max = 1, axes x,y = 513).
// CHECK-LABEL: func.func @start_wait
// CHECK:         memref.alloca() : memref<3xi64>
// CHECK:         %[[H:.*]] = call @par_rt_k_all_reduce_start(%{{.*}}, %c1_i64, %c0_i32, %c1_i32, %c513_i64) : (i64, i64, i32, i32, i64) -> i64
// CHECK-NEXT:    memref.copy
// CHECK-NEXT:    call @par_rt_k_wait(%[[H]]) : (i64) -> ()
par.mesh @mesh ["x"=2, "y"=4]
func.func @start_wait(%a: memref<16xf32>, %b: memref<16xf32>, %c: memref<4xf32>, %d: memref<4xf32>) {
  %h = par.buffer_all_reduce_start ins(%a : memref<16xf32>) outs(%b : memref<16xf32>) on @mesh axes = ["x", "y"] kind = max
  memref.copy %c, %d : memref<4xf32> to memref<4xf32>
  par.buffer_wait %h ins(%a : memref<16xf32>) outs(%b : memref<16xf32>)
  return
}

// -----

// Tests that a started all-gather takes the blocking one's arguments (dim
// 1 of 2x3: C = 2, D = 3; f32 = 0; axis y = 2) and returns the request
// handle, which the wait passes back.
// CHECK-LABEL: func.func @gather_start_wait
// CHECK:         %[[H:.*]] = call @par_rt_k_all_gather_start(%{{.*}}, %{{.*}}, %c2_i64, %c3_i64, %c0_i32, %c2_i64{{.*}}) : (i64, i64, i64, i64, i32, i64) -> i64
// CHECK-NEXT:    memref.copy
// CHECK-NEXT:    call @par_rt_k_wait(%[[H]]) : (i64) -> ()
par.mesh @mesh ["x"=2, "y"=4]
func.func @gather_start_wait(%a: memref<2x3xf32>, %b: memref<2x12xf32>, %c: memref<4xf32>, %d: memref<4xf32>) {
  %h = par.buffer_all_gather_start %a, %b on @mesh axes = ["y"] dim = 1 : memref<2x3xf32>, memref<2x12xf32>
  memref.copy %c, %d : memref<4xf32> to memref<4xf32>
  par.buffer_wait %h ins(%a : memref<2x3xf32>) outs(%b : memref<2x12xf32>)
  return
}

// -----

// Tests that an element type the runtime has no code for is an error at
// the op.
par.mesh @mesh ["x"=2, "y"=4]
func.func @bad_dtype(%a: memref<4xi16>, %b: memref<4xi16>) {
  // expected-error @below {{element type 'i16' is not supported by the runtime}}
  par.buffer_all_reduce %a, %b on @mesh axes = ["y"] kind = sum : memref<4xi16>, memref<4xi16>
  return
}

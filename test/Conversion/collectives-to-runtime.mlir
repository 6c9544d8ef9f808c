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

// Tests that an element type the runtime has no code for is an error at
// the op.
par.mesh @mesh ["x"=2, "y"=4]
func.func @bad_dtype(%a: memref<4xi16>, %b: memref<4xi16>) {
  // expected-error @below {{element type 'i16' is not supported by the runtime}}
  par.buffer_all_reduce %a, %b on @mesh axes = ["y"] kind = sum : memref<4xi16>, memref<4xi16>
  return
}

// RUN: par-opt %s --par-matmul-to-runtime | FileCheck %s

// Tests that a contiguous f32 matmul on buffers calls the runtime's BLAS
// kernel with M, N, K, the dtype code and accumulate = 1, and that an i32
// matmul or a strided operand is left to loop lowering.
// CHECK-LABEL: func.func @blas
// CHECK-DAG:     %[[M:.*]] = arith.constant 8 : i64
// CHECK-DAG:     %[[N:.*]] = arith.constant 16 : i64
// CHECK-DAG:     %[[K:.*]] = arith.constant 4 : i64
// CHECK:         call @par_rt_k_matmul(%{{.*}}, %{{.*}}, %{{.*}}, %[[M]], %[[N]], %[[K]], %{{.*}}, %{{.*}}) : (i64, i64, i64, i64, i64, i64, i32, i32) -> ()
// CHECK-NOT:     linalg.matmul ins(%arg0
// CHECK:         linalg.matmul ins(%arg3
// CHECK:         linalg.matmul ins(%arg6
func.func @blas(%a: memref<8x4xf32>, %b: memref<4x16xf32>, %c: memref<8x16xf32>,
                %ia: memref<8x4xi32>, %ib: memref<4x16xi32>, %ic: memref<8x16xi32>,
                %sa: memref<8x4xf32, strided<[8, 1]>>) {
  linalg.matmul ins(%a, %b : memref<8x4xf32>, memref<4x16xf32>) outs(%c : memref<8x16xf32>)
  linalg.matmul ins(%ia, %ib : memref<8x4xi32>, memref<4x16xi32>) outs(%ic : memref<8x16xi32>)
  linalg.matmul ins(%sa, %b : memref<8x4xf32, strided<[8, 1]>>, memref<4x16xf32>) outs(%c : memref<8x16xf32>)
  return
}

// Tests that attention's scores contraction (q[b,h,s,d] . k[b,h,t,d] over
// d) is a batch of b*h GEMMs with B transposed, and that a generic whose
// body is not acc + a * b stays a loop.
// CHECK-LABEL: func.func @batched
// CHECK:         call @par_rt_k_batch_matmul(%{{.*}}, %{{.*}}, %{{.*}}, %c6_i64, %c16_i64, %c16_i64_{{[0-9]+}}, %c8_i64, %c0_i32, %c1_i32, %c0_i32_{{[0-9]+}}, %c1_i32_{{[0-9]+}})
// CHECK:         linalg.generic
// CHECK:           arith.subf
#q = affine_map<(b, h, s, t, d) -> (b, h, s, d)>
#k = affine_map<(b, h, s, t, d) -> (b, h, t, d)>
#o = affine_map<(b, h, s, t, d) -> (b, h, s, t)>
func.func @batched(%q: memref<2x3x16x8xf32>, %k: memref<2x3x16x8xf32>, %o: memref<2x3x16x16xf32>) {
  linalg.generic {indexing_maps = [#q, #k, #o], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : memref<2x3x16x8xf32>, memref<2x3x16x8xf32>) outs(%o : memref<2x3x16x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#q, #k, #o], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : memref<2x3x16x8xf32>, memref<2x3x16x8xf32>) outs(%o : memref<2x3x16x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.subf %acc, %m : f32
    linalg.yield %r : f32
  }
  return
}

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

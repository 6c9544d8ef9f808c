// RUN: par-opt %s --par-matmul-to-runtime | FileCheck %s
// RUN: par-opt %s --par-matmul-to-runtime=fold-zero-fill=true | FileCheck %s --check-prefix=FOLD

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

// Tests that an input gradient as par-autodiff builds it, dX[m, n] +=
// W[n, k] * dY[m, k] (`ins(W, dY)`: the output's row dim indexes the second
// input), calls BLAS with the inputs swapped, dY as A and W as B transposed.
// CHECK-LABEL: func.func @swapped_input_grad
// CHECK-SAME:    (%[[W:.*]]: memref<16x8xf32>, %[[DY:.*]]: memref<4x8xf32>, %[[DX:.*]]: memref<4x16xf32>)
// CHECK-DAG:     %[[PW:.*]] = memref.extract_aligned_pointer_as_index %[[W]]
// CHECK-DAG:     %[[PDY:.*]] = memref.extract_aligned_pointer_as_index %[[DY]]
// CHECK-DAG:     %[[PDX:.*]] = memref.extract_aligned_pointer_as_index %[[DX]]
// CHECK-DAG:     %[[AW:.*]] = arith.index_cast %[[PW]] : index to i64
// CHECK-DAG:     %[[ADY:.*]] = arith.index_cast %[[PDY]] : index to i64
// CHECK-DAG:     %[[ADX:.*]] = arith.index_cast %[[PDX]] : index to i64
// CHECK-DAG:     %[[B1:.*]] = arith.constant 1 : i64
// CHECK-DAG:     %[[M:.*]] = arith.constant 4 : i64
// CHECK-DAG:     %[[N:.*]] = arith.constant 16 : i64
// CHECK-DAG:     %[[K:.*]] = arith.constant 8 : i64
// CHECK-DAG:     %[[F:.*]] = arith.constant 0 : i32
// CHECK-DAG:     %[[T:.*]] = arith.constant 1 : i32
// CHECK:         call @par_rt_k_batch_matmul(%[[ADY]], %[[AW]], %[[ADX]], %c1_i64{{(_[0-9]+)?}}, %c4_i64{{(_[0-9]+)?}}, %c16_i64{{(_[0-9]+)?}}, %c8_i64{{(_[0-9]+)?}}, %c0_i32{{(_[0-9]+)?}}, %c1_i32{{(_[0-9]+)?}}, %{{.*}}, %{{.*}})
// CHECK-NOT:     linalg.generic
#wt = affine_map<(m, n, k) -> (n, k)>
#dy = affine_map<(m, n, k) -> (m, k)>
#dx = affine_map<(m, n, k) -> (m, n)>
func.func @swapped_input_grad(%w: memref<16x8xf32>, %dy: memref<4x8xf32>, %dx: memref<4x16xf32>) {
  linalg.generic {indexing_maps = [#wt, #dy, #dx], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%w, %dy : memref<16x8xf32>, memref<4x8xf32>) outs(%dx : memref<4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  }
  return
}

// Tests the swapped 2-D forms without transposes (c[m, n] += b[k, n] *
// a[m, k], the product written b * a and the sum p + acc) and with A
// transposed (c[m, n] += b[k, n] * a[k, m]).
// CHECK-LABEL: func.func @swapped_2d
// CHECK-SAME:    (%[[B:.*]]: memref<8x16xf64>, %[[A:.*]]: memref<4x8xf64>, %[[AT:.*]]: memref<8x4xf64>, %[[C:.*]]: memref<4x16xf64>)
// CHECK-DAG:     %[[PB:.*]] = memref.extract_aligned_pointer_as_index %[[B]]
// CHECK-DAG:     %[[PA:.*]] = memref.extract_aligned_pointer_as_index %[[A]]
// CHECK-DAG:     %[[AB:.*]] = arith.index_cast %[[PB]] : index to i64
// CHECK-DAG:     %[[AA:.*]] = arith.index_cast %[[PA]] : index to i64
// CHECK:         call @par_rt_k_batch_matmul(%[[AA]], %[[AB]], %{{.*}}, %c1_i64{{(_[0-9]+)?}}, %c4_i64{{(_[0-9]+)?}}, %c16_i64{{(_[0-9]+)?}}, %c8_i64{{(_[0-9]+)?}}, %c0_i32{{(_[0-9]+)?}}, %c0_i32{{(_[0-9]+)?}}, %{{.*}}, %{{.*}})
// CHECK-DAG:     %[[PAT:.*]] = memref.extract_aligned_pointer_as_index %[[AT]]
// CHECK-DAG:     %[[PB2:.*]] = memref.extract_aligned_pointer_as_index %[[B]]
// CHECK-DAG:     %[[AAT:.*]] = arith.index_cast %[[PAT]] : index to i64
// CHECK-DAG:     %[[AB2:.*]] = arith.index_cast %[[PB2]] : index to i64
// CHECK-DAG:     %[[T0:.*]] = arith.constant 1 : i32
// CHECK-DAG:     %[[T1:.*]] = arith.constant 0 : i32
// CHECK:         call @par_rt_k_batch_matmul(%[[AAT]], %[[AB2]], %{{.*}}, %c1_i64{{(_[0-9]+)?}}, %c4_i64{{(_[0-9]+)?}}, %c16_i64{{(_[0-9]+)?}}, %c8_i64{{(_[0-9]+)?}}, %c1_i32{{(_[0-9]+)?}}, %c0_i32{{(_[0-9]+)?}}, %{{.*}}, %{{.*}})
// CHECK-NOT:     linalg.generic
#kn = affine_map<(m, n, k) -> (k, n)>
#mk = affine_map<(m, n, k) -> (m, k)>
#km = affine_map<(m, n, k) -> (k, m)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @swapped_2d(%b: memref<8x16xf64>, %a: memref<4x8xf64>, %at: memref<8x4xf64>, %c: memref<4x16xf64>) {
  linalg.generic {indexing_maps = [#kn, #mk, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%b, %a : memref<8x16xf64>, memref<4x8xf64>) outs(%c : memref<4x16xf64>) {
  ^bb0(%x: f64, %y: f64, %acc: f64):
    %p = arith.mulf %y, %x : f64
    %r = arith.addf %p, %acc : f64
    linalg.yield %r : f64
  }
  linalg.generic {indexing_maps = [#kn, #km, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%b, %at : memref<8x16xf64>, memref<8x4xf64>) outs(%c : memref<4x16xf64>) {
  ^bb0(%x: f64, %y: f64, %acc: f64):
    %p = arith.mulf %x, %y : f64
    %r = arith.addf %acc, %p : f64
    linalg.yield %r : f64
  }
  return
}

// Tests attention's backward contractions in autodiff's operand order:
// dQ[b,h,s,d] += K[b,h,t,d] * dS[b,h,s,t] (no transposes) and
// dK[b,h,t,d] += Q[b,h,s,d] * dS[b,h,s,t] (A = dS transposed), each a batch
// of b*h GEMMs with dS as A.
// CHECK-LABEL: func.func @swapped_batched
// CHECK-SAME:    (%[[K:.*]]: memref<2x3x16x8xf32>, %[[Q:.*]]: memref<2x3x16x8xf32>, %[[DS:.*]]: memref<2x3x16x16xf32>, %[[DQ:.*]]: memref<2x3x16x8xf32>)
// CHECK-DAG:     %[[PK:.*]] = memref.extract_aligned_pointer_as_index %[[K]]
// CHECK-DAG:     %[[PDS:.*]] = memref.extract_aligned_pointer_as_index %[[DS]]
// CHECK-DAG:     %[[AK:.*]] = arith.index_cast %[[PK]] : index to i64
// CHECK-DAG:     %[[ADS:.*]] = arith.index_cast %[[PDS]] : index to i64
// CHECK-DAG:     %[[NB:.*]] = arith.constant 6 : i64
// CHECK-DAG:     %[[S:.*]] = arith.constant 16 : i64
// CHECK-DAG:     %[[D:.*]] = arith.constant 8 : i64
// CHECK-DAG:     %[[F:.*]] = arith.constant 0 : i32
// CHECK:         call @par_rt_k_batch_matmul(%[[ADS]], %[[AK]], %{{.*}}, %c6_i64{{(_[0-9]+)?}}, %c16_i64{{(_[0-9]+)?}}, %c8_i64{{(_[0-9]+)?}}, %c16_i64{{(_[0-9]+)?}}, %c0_i32{{(_[0-9]+)?}}, %c0_i32{{(_[0-9]+)?}}, %{{.*}}, %{{.*}})
// CHECK-DAG:     %[[PQ:.*]] = memref.extract_aligned_pointer_as_index %[[Q]]
// CHECK-DAG:     %[[PDS2:.*]] = memref.extract_aligned_pointer_as_index %[[DS]]
// CHECK-DAG:     %[[AQ:.*]] = arith.index_cast %[[PQ]] : index to i64
// CHECK-DAG:     %[[ADS2:.*]] = arith.index_cast %[[PDS2]] : index to i64
// CHECK-DAG:     %[[NB2:.*]] = arith.constant 6 : i64
// CHECK-DAG:     %[[S2:.*]] = arith.constant 16 : i64
// CHECK-DAG:     %[[D2:.*]] = arith.constant 8 : i64
// CHECK-DAG:     %[[T:.*]] = arith.constant 1 : i32
// CHECK-DAG:     %[[F2:.*]] = arith.constant 0 : i32
// CHECK:         call @par_rt_k_batch_matmul(%[[ADS2]], %[[AQ]], %{{.*}}, %c6_i64{{(_[0-9]+)?}}, %c16_i64{{(_[0-9]+)?}}, %c8_i64{{(_[0-9]+)?}}, %c16_i64{{(_[0-9]+)?}}, %c1_i32{{(_[0-9]+)?}}, %c0_i32{{(_[0-9]+)?}}, %{{.*}}, %{{.*}})
// CHECK-NOT:     linalg.generic
#k_dq = affine_map<(b, h, s, d, t) -> (b, h, t, d)>
#ds_dq = affine_map<(b, h, s, d, t) -> (b, h, s, t)>
#dq = affine_map<(b, h, s, d, t) -> (b, h, s, d)>
#q_dk = affine_map<(b, h, t, d, s) -> (b, h, s, d)>
#ds_dk = affine_map<(b, h, t, d, s) -> (b, h, s, t)>
#dk = affine_map<(b, h, t, d, s) -> (b, h, t, d)>
func.func @swapped_batched(%k: memref<2x3x16x8xf32>, %q: memref<2x3x16x8xf32>, %ds: memref<2x3x16x16xf32>, %dq: memref<2x3x16x8xf32>) {
  linalg.generic {indexing_maps = [#k_dq, #ds_dq, #dq], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%k, %ds : memref<2x3x16x8xf32>, memref<2x3x16x16xf32>) outs(%dq : memref<2x3x16x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#q_dk, #ds_dk, #dk], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %ds : memref<2x3x16x8xf32>, memref<2x3x16x16xf32>) outs(%dq : memref<2x3x16x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  }
  return
}

// Tests that a swapped-order generic whose body is not acc + a * b (acc -
// a * b, acc + b / a, acc + b * b) is not sent to BLAS.
// CHECK-LABEL: func.func @swapped_not_gemm
// CHECK-NOT:     call @par_rt_k_batch_matmul
// CHECK:         linalg.generic
// CHECK:           arith.subf
// CHECK:         linalg.generic
// CHECK:           arith.divf
// CHECK:         linalg.generic
// CHECK:           arith.mulf %[[Y:.*]], %[[Y]]
// CHECK-NOT:     call @par_rt_k_batch_matmul
#wt2 = affine_map<(m, n, k) -> (n, k)>
#dy2 = affine_map<(m, n, k) -> (m, k)>
#dx2 = affine_map<(m, n, k) -> (m, n)>
func.func @swapped_not_gemm(%w: memref<16x8xf32>, %dy: memref<4x8xf32>, %dx: memref<4x16xf32>) {
  linalg.generic {indexing_maps = [#wt2, #dy2, #dx2], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%w, %dy : memref<16x8xf32>, memref<4x8xf32>) outs(%dx : memref<4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %r = arith.subf %acc, %p : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#wt2, #dy2, #dx2], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%w, %dy : memref<16x8xf32>, memref<4x8xf32>) outs(%dx : memref<4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.divf %b, %a : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#wt2, #dy2, #dx2], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%w, %dy : memref<16x8xf32>, memref<4x8xf32>) outs(%dx : memref<4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %b, %b : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  }
  return
}

// Tests mixed precision's contractions: a named matmul with bf16 inputs
// and an f32 accumulator, and a generic that widens its f16 input in the
// body (an input gradient: f32 dy times a 16-bit weight, whose inputs swap
// roles) call the mixed kernel with each input's dtype code (f32 = 0,
// f16 = 2, bf16 = 3); a 16-bit accumulator stays a loop.
// CHECK-LABEL: func.func @mixed
// CHECK:         call @par_rt_k_batch_matmul_mixed(%{{.*}}, %{{.*}}, %{{.*}}, %c1_i64{{(_[0-9]+)?}}, %c8_i64{{(_[0-9]+)?}}, %c16_i64{{(_[0-9]+)?}}, %c4_i64{{(_[0-9]+)?}}, %c0_i32{{(_[0-9]+)?}}, %c0_i32{{(_[0-9]+)?}}, %c3_i32{{(_[0-9]+)?}}, %c3_i32{{(_[0-9]+)?}}, %c1_i32{{(_[0-9]+)?}})
// CHECK:         call @par_rt_k_batch_matmul_mixed(%{{.*}}, %{{.*}}, %{{.*}}, %c1_i64{{(_[0-9]+)?}}, %c4_i64{{(_[0-9]+)?}}, %c16_i64{{(_[0-9]+)?}}, %c8_i64{{(_[0-9]+)?}}, %c0_i32{{(_[0-9]+)?}}, %c1_i32{{(_[0-9]+)?}}, %c0_i32{{(_[0-9]+)?}}, %c2_i32{{(_[0-9]+)?}}, %c1_i32{{(_[0-9]+)?}})
// CHECK:         linalg.matmul ins(%arg7
// CHECK-NOT:     call @par_rt_k_batch_matmul_mixed
func.func @mixed(%a: memref<8x4xbf16>, %b: memref<4x16xbf16>, %c: memref<8x16xf32>,
                 %w: memref<16x8xf16>, %dy: memref<4x8xf32>, %dx: memref<4x16xf32>,
                 %h: memref<8x16xf16>, %ha: memref<8x4xf16>, %hb: memref<4x16xf16>) {
  linalg.matmul ins(%a, %b : memref<8x4xbf16>, memref<4x16xbf16>) outs(%c : memref<8x16xf32>)
  linalg.generic {indexing_maps = [#wt2, #dy2, #dx2], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%w, %dy : memref<16x8xf16>, memref<4x8xf32>) outs(%dx : memref<4x16xf32>) {
  ^bb0(%x: f16, %y: f32, %acc: f32):
    %xe = arith.extf %x : f16 to f32
    %p = arith.mulf %xe, %y : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  }
  linalg.matmul ins(%ha, %hb : memref<8x4xf16>, memref<4x16xf16>) outs(%h : memref<8x16xf16>)
  return
}

// Tests that with fold-zero-fill (the cuda target's) a zero fill right
// before a GEMM is folded into it (accumulate 0, the fill erased), that one
// with a write of C in between is not, and that by default nothing folds.
// FOLD-LABEL: func.func @zero_fill
// FOLD-NOT:     linalg.fill
// FOLD:         call @par_rt_k_matmul({{.*}}, %c0_i32{{(_[0-9]+)?}})
// FOLD:         linalg.fill
// FOLD:         memref.store
// FOLD:         call @par_rt_k_matmul({{.*}}, %c1_i32{{(_[0-9]+)?}})
// CHECK-LABEL: func.func @zero_fill
// CHECK:         linalg.fill
// CHECK:         call @par_rt_k_matmul({{.*}}, %c1_i32{{(_[0-9]+)?}})
func.func @zero_fill(%a: memref<8x4xf32>, %b: memref<4x16xf32>, %c: memref<8x16xf32>, %v: f32) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<8x16xf32>)
  linalg.matmul ins(%a, %b : memref<8x4xf32>, memref<4x16xf32>) outs(%c : memref<8x16xf32>)
  linalg.fill ins(%zero : f32) outs(%c : memref<8x16xf32>)
  %i = arith.constant 0 : index
  memref.store %v, %c[%i, %i] : memref<8x16xf32>
  linalg.matmul ins(%a, %b : memref<8x4xf32>, memref<4x16xf32>) outs(%c : memref<8x16xf32>)
  return
}

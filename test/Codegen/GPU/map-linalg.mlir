// RUN: par-opt %s --par-gpu-map-linalg --split-input-file --verify-diagnostics | FileCheck %s

// Elementwise: the iteration space flattened, one thread per point, 256
// threads per block, ceil(points / 256) blocks; the body reads through the
// indexing maps (the broadcast bias by its column).
// CHECK-LABEL: func @bias_gelu
// CHECK-DAG:     %[[BLOCK:.*]] = arith.constant 256 : index
// CHECK:         %[[GRID:.*]] = arith.divui
// CHECK:         gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[GRID]], {{.*}} threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[BLOCK]]
// CHECK:           arith.muli %[[BX]]
// CHECK:           scf.if
// CHECK:             %[[J:.*]] = arith.remui
// CHECK:             %[[I:.*]] = arith.divui
// CHECK:             memref.load %arg0[%[[I]], %[[J]]]
// CHECK:             memref.load %arg1[%[[J]]]
// CHECK:             math.tanh
// CHECK:             memref.store {{.*}}, %arg2[%[[I]], %[[J]]]
// CHECK-NOT:     linalg.generic
func.func @bias_gelu(%x: memref<32x64xf32>, %b: memref<64xf32>, %y: memref<32x64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : memref<32x64xf32>, memref<64xf32>) outs(%y : memref<32x64xf32>) {
  ^bb0(%v: f32, %c: f32, %o: f32):
    %s = arith.addf %v, %c : f32
    %t = math.tanh %s : f32
    linalg.yield %t : f32
  }
  return
}

// -----

// A row sum (the fill before it folded into the kernel): one block per row,
// the row's 512 elements strided over 256 threads, a block-wide
// gpu.all_reduce, the first thread folds the fill's value and stores.
// CHECK-LABEL: func @row_sum
// CHECK-NOT:     linalg.fill
// CHECK:         gpu.launch blocks(%[[B:.*]], %{{.*}}, %{{.*}}) in {{.*}} threads(%[[T:.*]], %{{.*}}, %{{.*}}) in (%[[NT:.*]] = %c256
// CHECK:           %[[P:.*]] = scf.for %{{.*}} = %[[T]] to %{{.*}} step %[[NT]] iter_args(%[[ACC:.*]] = %cst
// CHECK:             memref.load %arg0[%[[B]],
// CHECK:             arith.addf %{{.*}}, %[[ACC]]
// CHECK:           %[[TOTAL:.*]] = gpu.all_reduce add %[[P]] uniform
// CHECK:           scf.if
// CHECK-NOT:         memref.load %arg1
// CHECK:             %[[F:.*]] = arith.addf %[[TOTAL]], %cst
// CHECK:             memref.store %[[F]], %arg1[%[[B]]]
func.func @row_sum(%x: memref<16x512xf32>, %s: memref<16xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%s : memref<16xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<16x512xf32>) outs(%s : memref<16xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %e = math.exp %v : f32
    %r = arith.addf %e, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A bf16 max over the leading dim (a column reduction, the reduction loop
// first): 64 rows fit 64 threads; the shuffles run on f32.
// CHECK-LABEL: func @col_max_bf16
// CHECK:         gpu.launch {{.*}} threads({{.*}}) in (%{{.*}} = %c64
// CHECK:           arith.maximumf
// CHECK:           arith.extf {{.*}} : bf16 to f32
// CHECK:           gpu.all_reduce maximumf
// CHECK:           arith.truncf {{.*}} : f32 to bf16
// CHECK:           memref.load %arg1
func.func @col_max_bf16(%x: memref<64x8xbf16>, %m: memref<8xbf16>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<64x8xbf16>) outs(%m : memref<8xbf16>) {
  ^bb0(%v: bf16, %acc: bf16):
    %r = arith.maximumf %acc, %v : bf16
    linalg.yield %r : bf16
  }
  return
}

// -----

// An argmax (two outputs, each reading the other): no combiner splits it,
// so each thread runs its row's reduction in order.
// CHECK-LABEL: func @argmax
// CHECK:         gpu.launch
// CHECK-NOT:       gpu.all_reduce
// CHECK:           scf.for {{.*}} iter_args
// CHECK:             arith.select
// CHECK:           memref.store
// CHECK:           memref.store
func.func @argmax(%x: memref<16x128xf32>, %m: memref<16xf32>, %i: memref<16xi64>) {
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>, affine_map<(r, c) -> (r)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<16x128xf32>) outs(%m, %i : memref<16xf32>, memref<16xi64>) {
  ^bb0(%v: f32, %best: f32, %at: i64):
    %c = linalg.index 1 : index
    %ci = arith.index_cast %c : index to i64
    %gt = arith.cmpf ogt, %v, %best : f32
    %nb = arith.select %gt, %v, %best : f32
    %na = arith.select %gt, %ci, %at : i64
    linalg.yield %nb, %na : f32, i64
  }
  return
}

// -----

// A strided copy (a slice's buffer) is a kernel like any other.
// CHECK-LABEL: func @strided_copy
// CHECK-NOT:     memref.copy
// CHECK:         gpu.launch
// CHECK:           memref.load %{{.*}} : memref<4x8xf32, strided<[16, 1]>>
func.func @strided_copy(%x: memref<4x16xf32>, %y: memref<4x8xf32>) {
  %s = memref.subview %x[0, 0] [4, 8] [1, 1] : memref<4x16xf32> to memref<4x8xf32, strided<[16, 1]>>
  memref.copy %s, %y : memref<4x8xf32, strided<[16, 1]>> to memref<4x8xf32>
  return
}

// -----

func.func private @log(f32)

func.func @side_effect(%x: memref<8xf32>, %y: memref<8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                  iterator_types = ["parallel"]}
      ins(%x : memref<8xf32>) outs(%y : memref<8xf32>) {
  ^bb0(%v: f32, %o: f32):
    // expected-error @below {{par-gpu-map-linalg: no GPU lowering for 'func.call' in a linalg body (it has side effects)}}
    func.call @log(%v) : (f32) -> ()
    linalg.yield %v : f32
  }
  return
}

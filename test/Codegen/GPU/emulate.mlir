// par-gpu-map-linalg's kernels compute what the CPU's loops compute: the
// kernels are run on the host (par-test-emulate-gpu-launch: a loop over
// blocks and threads, block reductions in thread order) and compared with
// the plain CPU lowering of the same linalg ops. Float reductions are
// reassociated by the block mapping (each thread folds every 256th
// element, then the block combines the threads' partials), so the values
// agree to float rounding: relative 1e-5 (sums of at most 300 terms of
// magnitude <= 1 in f32: the reordering error is below 300 * 2^-24 ~ 2e-5
// of the largest partial sum; observed far below), bf16 max exactly.
// DEFINE: %{lower} = --lower-affine --convert-scf-to-cf --expand-strided-metadata --lower-affine --finalize-memref-to-llvm --convert-math-to-llvm --convert-arith-to-llvm --convert-index-to-llvm --convert-func-to-llvm --convert-cf-to-llvm --reconcile-unrealized-casts
// RUN: par-opt %s --par-gpu-map-linalg --par-test-emulate-gpu-launch --convert-linalg-to-loops %{lower} | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils > %t.gpu
// RUN: par-opt %s --convert-linalg-to-loops %{lower} | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils > %t.cpu
// RUN: %python %S/compare_prints.py %t.gpu %t.cpu 1e-5 | FileCheck %s
// CHECK: compared 7 memrefs, {{[0-9]+}} values: ok

#id2 = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
#col = affine_map<(i, j) -> (j)>

func.func private @printMemrefF32(memref<*xf32>)

func.func @print(%m: memref<?x?xf32>) {
  %u = memref.cast %m : memref<?x?xf32> to memref<*xf32>
  func.call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  return
}

func.func @main() {
  %x = memref.alloc() : memref<16x300xf32>
  // x[i][j] = sin(0.37 i + 0.011 j * (j % 7)): thread per point, indices.
  linalg.generic {indexing_maps = [#id2], iterator_types = ["parallel", "parallel"]}
      outs(%x : memref<16x300xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %c7 = arith.constant 7 : index
    %jm = arith.remui %j, %c7 : index
    %jj = arith.muli %j, %jm : index
    %ii = arith.index_cast %i : index to i64
    %ji = arith.index_cast %jj : index to i64
    %fi = arith.sitofp %ii : i64 to f32
    %fj = arith.sitofp %ji : i64 to f32
    %a = arith.constant 0.37 : f32
    %b = arith.constant 0.011 : f32
    %u = arith.mulf %fi, %a : f32
    %v = arith.mulf %fj, %b : f32
    %w = arith.addf %u, %v : f32
    %s = math.sin %w : f32
    linalg.yield %s : f32
  }
  // Row softmax as linalg decomposes it: max (fill folded), exp(x - max),
  // sum (fill folded), divide.
  %max = memref.alloc() : memref<16xf32>
  %sum = memref.alloc() : memref<16xf32>
  %e = memref.alloc() : memref<16x300xf32>
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%ninf : f32) outs(%max : memref<16xf32>)
  linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<16x300xf32>) outs(%max : memref<16xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %r = arith.maxnumf %v, %acc : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id2, #row, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x, %max : memref<16x300xf32>, memref<16xf32>) outs(%e : memref<16x300xf32>) {
  ^bb0(%v: f32, %m: f32, %o: f32):
    %d = arith.subf %v, %m : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  }
  linalg.fill ins(%zero : f32) outs(%sum : memref<16xf32>)
  linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]}
      ins(%e : memref<16x300xf32>) outs(%sum : memref<16xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %r = arith.addf %v, %acc : f32
    linalg.yield %r : f32
  }
  %sm = memref.alloc() : memref<16x300xf32>
  linalg.generic {indexing_maps = [#id2, #row, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%e, %sum : memref<16x300xf32>, memref<16xf32>) outs(%sm : memref<16x300xf32>) {
  ^bb0(%v: f32, %s: f32, %o: f32):
    %r = arith.divf %v, %s : f32
    linalg.yield %r : f32
  }
  // Column sums of x^2 (16 rows: fewer than a warp, a thread per column),
  // accumulated onto x's first row (no fill: the output is read).
  %cs = memref.alloc() : memref<300xf32>
  %row0 = memref.subview %x[0, 0] [1, 300] [1, 1] : memref<16x300xf32> to memref<300xf32, strided<[1]>>
  memref.copy %row0, %cs : memref<300xf32, strided<[1]>> to memref<300xf32>
  linalg.generic {indexing_maps = [#id2, #col], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<16x300xf32>) outs(%cs : memref<300xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %q = arith.mulf %v, %v : f32
    %r = arith.addf %acc, %q : f32
    linalg.yield %r : f32
  }
  // Argmax per row (two outputs, a thread per row), as f32 indices.
  %am = memref.alloc() : memref<16xf32>
  %ai = memref.alloc() : memref<16xi64>
  %czero = arith.constant 0 : i64
  linalg.fill ins(%ninf : f32) outs(%am : memref<16xf32>)
  linalg.fill ins(%czero : i64) outs(%ai : memref<16xi64>)
  linalg.generic {indexing_maps = [#id2, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<16x300xf32>) outs(%am, %ai : memref<16xf32>, memref<16xi64>) {
  ^bb0(%v: f32, %best: f32, %at: i64):
    %c = linalg.index 1 : index
    %ci = arith.index_cast %c : index to i64
    %gt = arith.cmpf ogt, %v, %best : f32
    %nb = arith.select %gt, %v, %best : f32
    %na = arith.select %gt, %ci, %at : i64
    linalg.yield %nb, %na : f32, i64
  }
  %aif = memref.alloc() : memref<16xf32>
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%ai : memref<16xi64>) outs(%aif : memref<16xf32>) {
  ^bb0(%v: i64, %o: f32):
    %f = arith.sitofp %v : i64 to f32
    linalg.yield %f : f32
  }
  // bf16 row max over 300 (block-wide on f32 shuffles) and an i32 row sum.
  %xb = memref.alloc() : memref<16x300xbf16>
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<16x300xf32>) outs(%xb : memref<16x300xbf16>) {
  ^bb0(%v: f32, %o: bf16):
    %t = arith.truncf %v : f32 to bf16
    linalg.yield %t : bf16
  }
  %mb = memref.alloc() : memref<16xbf16>
  %ninfb = arith.constant 0xFF80 : bf16
  linalg.fill ins(%ninfb : bf16) outs(%mb : memref<16xbf16>)
  linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]}
      ins(%xb : memref<16x300xbf16>) outs(%mb : memref<16xbf16>) {
  ^bb0(%v: bf16, %acc: bf16):
    %r = arith.maximumf %acc, %v : bf16
    linalg.yield %r : bf16
  }
  %is = memref.alloc() : memref<16xi32>
  %c0i = arith.constant 0 : i32
  linalg.fill ins(%c0i : i32) outs(%is : memref<16xi32>)
  linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<16x300xf32>) outs(%is : memref<16xi32>) {
  ^bb0(%v: f32, %acc: i32):
    %k = arith.constant 1000.0 : f32
    %s = arith.mulf %v, %k : f32
    %n = arith.fptosi %s : f32 to i32
    %r = arith.addi %acc, %n : i32
    linalg.yield %r : i32
  }
  %small = memref.alloc() : memref<2x16xf32>
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>, affine_map<(i) -> (i)>, affine_map<(i) -> (0, i)>, affine_map<(i) -> (1, i)>], iterator_types = ["parallel"]}
      ins(%mb, %is, %aif : memref<16xbf16>, memref<16xi32>, memref<16xf32>) outs(%small, %small : memref<2x16xf32>, memref<2x16xf32>) {
  ^bb0(%m: bf16, %s: i32, %a: f32, %o0: f32, %o1: f32):
    %mf = arith.extf %m : bf16 to f32
    %sf = arith.sitofp %s : i32 to f32
    %t = arith.addf %sf, %a : f32
    linalg.yield %mf, %t : f32, f32
  }
  %1 = memref.cast %sm : memref<16x300xf32> to memref<?x?xf32>
  func.call @print(%1) : (memref<?x?xf32>) -> ()
  %2 = memref.expand_shape %cs [[0, 1]] output_shape [1, 300] : memref<300xf32> into memref<1x300xf32>
  %3 = memref.cast %2 : memref<1x300xf32> to memref<?x?xf32>
  func.call @print(%3) : (memref<?x?xf32>) -> ()
  %4 = memref.expand_shape %am [[0, 1]] output_shape [1, 16] : memref<16xf32> into memref<1x16xf32>
  %5 = memref.cast %4 : memref<1x16xf32> to memref<?x?xf32>
  func.call @print(%5) : (memref<?x?xf32>) -> ()
  %6 = memref.cast %small : memref<2x16xf32> to memref<?x?xf32>
  func.call @print(%6) : (memref<?x?xf32>) -> ()
  %7 = memref.expand_shape %max [[0, 1]] output_shape [1, 16] : memref<16xf32> into memref<1x16xf32>
  %8 = memref.cast %7 : memref<1x16xf32> to memref<?x?xf32>
  func.call @print(%8) : (memref<?x?xf32>) -> ()
  %9 = memref.expand_shape %sum [[0, 1]] output_shape [1, 16] : memref<16xf32> into memref<1x16xf32>
  %10 = memref.cast %9 : memref<1x16xf32> to memref<?x?xf32>
  func.call @print(%10) : (memref<?x?xf32>) -> ()
  %11 = memref.cast %x : memref<16x300xf32> to memref<?x?xf32>
  func.call @print(%11) : (memref<?x?xf32>) -> ()
  return
}

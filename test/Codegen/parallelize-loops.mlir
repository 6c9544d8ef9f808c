// par-parallelize-loops: linalg on buffers to loops, the outer parallel
// loops of a big op (and a forall with enough work) as scf.parallel, small
// ops, ops led by a reduction loop and loops nested in a parallel one as
// scf.for; with threads=false nothing is parallel. Through par-lower-cpu
// the parallel loops are OpenMP worksharing loops.
// RUN: par-opt %s --par-parallelize-loops=min-iterations=4096 | FileCheck %s
// RUN: par-opt %s --par-parallelize-loops="min-iterations=4096 threads=false" | FileCheck %s --check-prefix=SEQ
// RUN: par-opt %s --par-lower-cpu | FileCheck %s --check-prefix=OMP

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>

// CHECK-LABEL: func.func @big
// CHECK:         scf.parallel
// CHECK-NOT:     scf.parallel
// CHECK:         return
// SEQ-LABEL: func.func @big
// SEQ-NOT:     scf.parallel
// SEQ:         return
// OMP-LABEL: llvm.func {{.*}}@big(
// OMP:         omp.parallel
// OMP:         omp.wsloop
func.func @big(%a: memref<256x128xf32>, %b: memref<256x128xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a : memref<256x128xf32>) outs(%b : memref<256x128xf32>) {
  ^bb0(%x: f32, %y: f32):
    %e = arith.mulf %x, %x : f32
    linalg.yield %e : f32
  }
  return
}

// CHECK-LABEL: func.func @small
// CHECK-NOT:     scf.parallel
// CHECK:         scf.for
// CHECK:         return
func.func @small(%a: memref<16x16xf32>, %b: memref<16x16xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a : memref<16x16xf32>) outs(%b : memref<16x16xf32>) {
  ^bb0(%x: f32, %y: f32):
    %e = arith.mulf %x, %x : f32
    linalg.yield %e : f32
  }
  return
}

// A column sum (reduction loop outermost) stays sequential.
// CHECK-LABEL: func.func @columns
// CHECK-NOT:     scf.parallel
// CHECK:         return
#t = affine_map<(d0, d1) -> (d1, d0)>
func.func @columns(%a: memref<256x128xf32>, %s: memref<128xf32>) {
  linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]} ins(%a : memref<256x128xf32>) outs(%s : memref<128xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %e = arith.addf %x, %acc : f32
    linalg.yield %e : f32
  }
  return
}

// A fused chain's forall: the loop over row blocks is parallel, the ops
// in it sequential loops.
// CHECK-LABEL: func.func @chain
// CHECK:         scf.parallel
// CHECK-NOT:     scf.parallel
// CHECK:         scf.for
// CHECK:         return
// SEQ-LABEL: func.func @chain
// SEQ-NOT:     scf.parallel
// SEQ:         return
func.func @chain(%a: memref<256x128xf32>, %s: memref<256xf32>) {
  scf.forall (%i) = (0) to (256) step (64) {
    %x = memref.subview %a[%i, 0] [64, 128] [1, 1] : memref<256x128xf32> to memref<64x128xf32, strided<[128, 1], offset: ?>>
    %y = memref.subview %s[%i] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
    linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%x : memref<64x128xf32, strided<[128, 1], offset: ?>>) outs(%y : memref<64xf32, strided<[1], offset: ?>>) {
    ^bb0(%v: f32, %acc: f32):
      %e = arith.addf %v, %acc : f32
      linalg.yield %e : f32
    }
  }
  return
}

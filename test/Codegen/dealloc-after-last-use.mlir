// RUN: par-opt %s --split-input-file --par-dealloc-after-last-use | FileCheck %s

// Each temporary is freed right after its last use, not at the end of the
// function: %a after the op that reads it into %b, %b after the op that
// reads it into the result.
// CHECK-LABEL: func.func @chain
// CHECK:      %[[A:.*]] = memref.alloc()
// CHECK-NEXT: linalg.copy ins(%{{.*}} : memref<4xf32>) outs(%[[A]]
// CHECK-NEXT: %[[B:.*]] = memref.alloc()
// CHECK-NEXT: linalg.copy ins(%[[A]] : memref<4xf32>) outs(%[[B]]
// CHECK-NEXT: bufferization.dealloc (%[[A]] : memref<4xf32>)
// CHECK-NEXT: %[[C:.*]] = memref.alloc()
// CHECK-NEXT: linalg.copy ins(%[[B]] : memref<4xf32>) outs(%[[C]]
// CHECK-NEXT: bufferization.dealloc (%[[B]] : memref<4xf32>)
// CHECK-NEXT: return %[[C]]
func.func @chain(%x: memref<4xf32>) -> memref<4xf32> {
  %true = arith.constant true
  %a = memref.alloc() : memref<4xf32>
  linalg.copy ins(%x : memref<4xf32>) outs(%a : memref<4xf32>)
  %b = memref.alloc() : memref<4xf32>
  linalg.copy ins(%a : memref<4xf32>) outs(%b : memref<4xf32>)
  %c = memref.alloc() : memref<4xf32>
  linalg.copy ins(%b : memref<4xf32>) outs(%c : memref<4xf32>)
  bufferization.dealloc (%a : memref<4xf32>) if (%true)
  bufferization.dealloc (%b : memref<4xf32>) if (%true)
  return %c : memref<4xf32>
}

// -----

// A view's use is the buffer's use; an op with regions uses what its body
// uses; the view that only feeds the deallocation moves with it.
// CHECK-LABEL: func.func @views_and_regions
// CHECK:      scf.for
// CHECK:        memref.load %[[V:.*]][
// CHECK:      }
// CHECK-NEXT: %[[BASE:.*]], %{{.*}}, %{{.*}}, %{{.*}} = memref.extract_strided_metadata %[[A:.*]] :
// CHECK-NEXT: bufferization.dealloc (%[[BASE]] : memref<f32>)
// CHECK:      linalg.fill
// CHECK-NEXT: return
func.func @views_and_regions(%x: memref<8xf32>, %out: memref<8xf32>) {
  %true = arith.constant true
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %a = memref.alloc() : memref<2x4xf32>
  %v = memref.collapse_shape %a [[0, 1]] : memref<2x4xf32> into memref<8xf32>
  linalg.copy ins(%x : memref<8xf32>) outs(%v : memref<8xf32>)
  scf.for %i = %c0 to %c4 step %c1 {
    %e = memref.load %v[%i] : memref<8xf32>
    memref.store %e, %out[%i] : memref<8xf32>
  }
  linalg.fill ins(%zero : f32) outs(%x : memref<8xf32>)
  %base, %off, %sizes:2, %strides:2 = memref.extract_strided_metadata %a : memref<2x4xf32> -> memref<f32>, index, index, index, index, index
  bufferization.dealloc (%base : memref<f32>) if (%true)
  return
}

// -----

// A buffer in flight in an asynchronous all-reduce is read until its wait:
// it is freed after the wait, not after the start.
// CHECK-LABEL: func.func @async
// CHECK:      %[[H:.*]] = par.buffer_all_reduce_start
// CHECK-NEXT: linalg.fill
// CHECK-NEXT: par.buffer_wait %[[H]]
// CHECK-NEXT: bufferization.dealloc (%[[G:.*]] : memref<4xf32>)
// CHECK-NEXT: linalg.fill
par.mesh @mesh ["dp"=2]
func.func @async(%x: memref<4xf32>, %y: memref<4xf32>) -> memref<4xf32> {
  %true = arith.constant true
  %zero = arith.constant 0.0 : f32
  %g = memref.alloc() : memref<4xf32>
  linalg.copy ins(%x : memref<4xf32>) outs(%g : memref<4xf32>)
  %r = memref.alloc() : memref<4xf32>
  %h = par.buffer_all_reduce_start ins(%g : memref<4xf32>) outs(%r : memref<4xf32>) on @mesh axes = ["dp"] kind = sum
  linalg.fill ins(%zero : f32) outs(%y : memref<4xf32>)
  par.buffer_wait %h ins(%g : memref<4xf32>) outs(%r : memref<4xf32>)
  linalg.fill ins(%zero : f32) outs(%x : memref<4xf32>)
  bufferization.dealloc (%g : memref<4xf32>) if (%true)
  return %r : memref<4xf32>
}

// -----

// A call's result may alias what it is passed: the buffer lives until the
// result's last use.
// CHECK-LABEL: func.func @through_call
// CHECK:      %[[R:.*]] = call @id
// CHECK-NEXT: linalg.fill
// CHECK-NEXT: linalg.copy ins(%[[R]]
// CHECK-NEXT: bufferization.dealloc
func.func private @id(%m: memref<4xf32>) -> memref<4xf32> {
  return %m : memref<4xf32>
}
func.func @through_call(%x: memref<4xf32>, %y: memref<4xf32>) {
  %true = arith.constant true
  %zero = arith.constant 0.0 : f32
  %a = memref.alloc() : memref<4xf32>
  %r = call @id(%a) : (memref<4xf32>) -> memref<4xf32>
  linalg.fill ins(%zero : f32) outs(%x : memref<4xf32>)
  linalg.copy ins(%r : memref<4xf32>) outs(%y : memref<4xf32>)
  linalg.fill ins(%zero : f32) outs(%x : memref<4xf32>)
  bufferization.dealloc (%a : memref<4xf32>) if (%true)
  return
}

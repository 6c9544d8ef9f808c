// RUN: par-opt %s --allow-unregistered-dialect --par-gpu-device-memory --split-input-file --verify-diagnostics | FileCheck %s

// Temporaries are device memory; a constant gets a device copy for the
// call; a value the host branches on is copied out by one thread.
// CHECK-LABEL: func @temps
// CHECK:         %[[HOST:.*]] = memref.alloca() : memref<1xf32>
// CHECK:         %[[G:.*]] = memref.get_global @table : memref<8xf32>
// CHECK:         %[[C:.*]] = gpu.alloc () : memref<8xf32>
// CHECK:         gpu.memcpy %[[C]], %[[G]]
// CHECK:         %[[T:.*]] = gpu.alloc () : memref<8xf32>
// CHECK:         scf.for
// CHECK:           "test.use"(%[[C]])
// CHECK:         %[[ONE:.*]] = gpu.alloc () : memref<1xf32>
// CHECK:         gpu.launch
// CHECK:           %[[V:.*]] = memref.load %[[T]][%{{.*}}]
// CHECK:           memref.store %[[V]], %[[ONE]]
// CHECK:         gpu.memcpy %[[HOST]], %[[ONE]]
// CHECK:         %[[X:.*]] = memref.load %[[HOST]]
// CHECK:         gpu.dealloc %[[ONE]]
// CHECK:         arith.cmpf ogt, %[[X]]
// CHECK:         gpu.dealloc %[[T]]
// CHECK:         gpu.dealloc %[[C]]
// CHECK-NEXT:    return
memref.global "private" constant @table : memref<8xf32> = dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]>
func.func @temps(%i: index) -> i1 {
  %t = memref.alloc() : memref<8xf32>
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c1 = arith.constant 1 : index
  // A constant read in a loop: its device copy is made once, at the entry.
  scf.for %k = %c0 to %c2 step %c1 {
    %g = memref.get_global @table : memref<8xf32>
    "test.use"(%g) : (memref<8xf32>) -> ()
  }
  %x = memref.load %t[%i] : memref<8xf32>
  %zero = arith.constant 0.0 : f32
  %p = arith.cmpf ogt, %x, %zero : f32
  memref.dealloc %t : memref<8xf32>
  return %p : i1
}

// -----

// Host tables of pointers (index) stay on the host.
// CHECK-LABEL: func @tables
// CHECK:         memref.alloc() : memref<2xindex>
// CHECK:         memref.store
// CHECK:         memref.dealloc
func.func @tables(%p: index) {
  %c0 = arith.constant 0 : index
  %t = memref.alloc() : memref<2xindex>
  memref.store %p, %t[%c0] : memref<2xindex>
  memref.dealloc %t : memref<2xindex>
  return
}

// -----

func.func @host_store(%x: memref<8xf32>, %v: f32) {
  %c0 = arith.constant 0 : index
  // expected-error @below {{par-gpu-device-memory: 'memref.store' writes device memory on the host; the cuda target has no lowering for it}}
  memref.store %v, %x[%c0] : memref<8xf32>
  return
}

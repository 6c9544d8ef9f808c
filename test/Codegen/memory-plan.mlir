// The memory plan walks the bufferized program: every allocation counts
// from its alloc to its dealloc (its bytes rounded up to its alignment, as
// the runtime's pool is asked), a call holds its callee's peak on top of the
// caller's live buffers and hands over what it returns fresh, and the
// runner keeps the arguments and a buffer per result.
// RUN: echo '{"functions": [{"name": "entry", "inputs": [{"dtype": "f32", "init": "zeros"}, {"dtype": "i64"}], "outputs": [{"dtype": "f32"}]}]}' > %t.json
// RUN: par-opt %s "--par-memory-plan=manifest=%t.json report=true limit=8000" -o /dev/null 2>%t.err | FileCheck %s
// RUN: FileCheck %s --check-prefix=WARN < %t.err
// RUN: FileCheck %s --check-prefix=JSON < %t.json
//
// @entry: a (2048, a multiple of its alignment 64) is live when the callee
// peaks at t (4096) plus its result r (1024): 2048 + 5120 = 7168 bytes of
// program; then r (1024) is handed over. With the arguments (1024 + 512)
// and the result's buffer (1024): 9728 bytes.
// CHECK: par-memory-plan: @entry: {{.*}} (9728 bytes; arguments
// CHECK-SAME: program 0.01 MiB)
// CHECK-NEXT: at the peak: parameters 0.00 MiB temporaries 0.01 MiB data 0.00 MiB
// WARN: warning: the memory plan of 'entry' needs 0.01 MiB per device, over the memory-limit of 0.01 MiB
// WARN-SAME: options that reduce it: zero=3
// JSON:      "memory": {
// JSON:        "allocations": {
// JSON-NEXT:     "1024": "memref<256xf32>",
// JSON-NEXT:     "2048": "memref<512xf32>",
// JSON-NEXT:     "4096": "memref<1024xf32>"
// JSON:        "arguments": 1536,
// JSON:        "at_peak": {
// JSON:          "parameters": 1024,
// JSON:          "temporaries": 8192
// JSON:        "peak": 9728,
// JSON-NEXT:   "program_peak": 7168,
// JSON-NEXT:   "results": 1024
// JSON:      "name": "entry"

func.func private @callee(%x: memref<256xf32>) -> memref<256xf32> {
  %t = memref.alloc() : memref<1024xf32>
  %z = arith.constant 0.0 : f32
  linalg.fill ins(%z : f32) outs(%t : memref<1024xf32>)
  %r = memref.alloc() : memref<256xf32>
  linalg.copy ins(%x : memref<256xf32>) outs(%r : memref<256xf32>)
  memref.dealloc %t : memref<1024xf32>
  return %r : memref<256xf32>
}

func.func @entry(%x: memref<256xf32>, %d: memref<64xi64>) -> memref<256xf32> {
  %a = memref.alloc() {alignment = 64 : i64} : memref<512xf32>
  %z = arith.constant 0.0 : f32
  linalg.fill ins(%z : f32) outs(%a : memref<512xf32>)
  %r = call @callee(%x) : (memref<256xf32>) -> memref<256xf32>
  memref.dealloc %a : memref<512xf32>
  return %r : memref<256xf32>
}

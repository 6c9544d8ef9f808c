// Tests every case of the sharding strategies suite (Megatron MLP, heads
// split attention, data parallel and ZeRO-style training steps, a 2-D mesh)
// on real ranks against the unsharded program on the same inputs.
// RUN: %python %S/chunk.py %par_src_root/test/Dialect/Par/strategies.mlir 0 > %t.mlp.mlir
// RUN: par-compile %t.mlp.mlir -o %t.mlp && par-run -n 4 %t.mlp --verify | FileCheck %s
// RUN: %python %S/chunk.py %par_src_root/test/Dialect/Par/strategies.mlir 1 > %t.att.mlir
// RUN: par-compile %t.att.mlir -o %t.att && par-run -n 2 %t.att --verify | FileCheck %s
// RUN: %python %S/chunk.py %par_src_root/test/Dialect/Par/strategies.mlir 2 > %t.dp.mlir
// RUN: par-compile %t.dp.mlir -o %t.dp && par-run -n 4 %t.dp --verify | FileCheck %s --check-prefix=TRAIN
// RUN: %python %S/chunk.py %par_src_root/test/Dialect/Par/strategies.mlir 3 > %t.zero.mlir
// RUN: par-compile %t.zero.mlir -o %t.zero && par-run -n 4 %t.zero --verify | FileCheck %s --check-prefixes=TRAIN,ZERO
// RUN: %python %S/chunk.py %par_src_root/test/Dialect/Par/strategies.mlir 4 > %t.2d.mlir
// RUN: par-compile %t.2d.mlir -o %t.2d && par-run -n 8 %t.2d --verify | FileCheck %s
// CHECK: result0 f32: max abs error {{.*}} OK
// ZERO: rank 0: {{.*}} bytes sent in 5 collectives
// TRAIN: result0 f32: max abs error {{.*}} OK
// TRAIN: result1 f32: max abs error {{.*}} OK
// TRAIN: result2 f32: max abs error {{.*}} OK

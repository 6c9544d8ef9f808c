// Tests every reshard decomposition of the partition suite (gathers, local
// slices, all_to_all, all_reduce and reduce_scatter of partial values, a
// swap of axes between dims, a reorder within a dim, a contraction split
// over its reduction, reshapes, slices, a loop) on 8 real ranks
// (mesh x=2, y=4) against the unsharded program.
// RUN: %python %S/chunk.py %par_src_root/test/Dialect/Par/partition.mlir 0 > %t.0.mlir
// RUN: par-compile %t.0.mlir -o %t.0 && par-run -n 8 %t.0 --verify | FileCheck %s
// RUN: %python %S/chunk.py %par_src_root/test/Dialect/Par/partition.mlir 1 > %t.1.mlir
// RUN: par-compile %t.1.mlir -o %t.1 && par-run -n 8 %t.1 --verify | FileCheck %s
// RUN: %python %S/chunk.py %par_src_root/test/Dialect/Par/partition.mlir 2 > %t.2.mlir
// RUN: par-compile %t.2.mlir -o %t.2 && par-run -n 8 %t.2 --verify | FileCheck %s
// RUN: %python %S/chunk.py %par_src_root/test/Dialect/Par/partition.mlir 3 > %t.3.mlir
// RUN: par-compile %t.3.mlir -o %t.3 && par-run -n 8 %t.3 --verify | FileCheck %s --check-prefix=TWO
// RUN: %python %S/chunk.py %par_src_root/test/Dialect/Par/partition.mlir 4 > %t.4.mlir
// RUN: par-compile %t.4.mlir -o %t.4 && par-run -n 8 %t.4 --verify | FileCheck %s
// RUN: %python %S/chunk.py %par_src_root/test/Dialect/Par/partition.mlir 5 > %t.5.mlir
// RUN: par-compile %t.5.mlir -o %t.5 && par-run -n 8 %t.5 --verify | FileCheck %s
// RUN: %python %S/chunk.py %par_src_root/test/Dialect/Par/partition.mlir 6 > %t.6.mlir
// RUN: par-compile %t.6.mlir -o %t.6 && par-run -n 8 %t.6 --verify | FileCheck %s
// RUN: %python %S/chunk.py %par_src_root/test/Dialect/Par/partition.mlir 7 > %t.7.mlir
// RUN: par-compile %t.7.mlir -o %t.7 && par-run -n 8 %t.7 --verify | FileCheck %s
// RUN: %python %S/chunk.py %par_src_root/test/Dialect/Par/partition.mlir 8 > %t.8.mlir
// RUN: par-compile %t.8.mlir -o %t.8 && par-run -n 8 %t.8 --verify | FileCheck %s
// RUN: %python %S/chunk.py %par_src_root/test/Dialect/Par/partition.mlir 9 > %t.9.mlir
// RUN: par-compile %t.9.mlir -o %t.9 && par-run -n 8 %t.9 --verify | FileCheck %s
// RUN: %python %S/chunk.py %par_src_root/test/Dialect/Par/partition.mlir 10 > %t.10.mlir
// RUN: par-compile %t.10.mlir -o %t.10 && par-run -n 8 %t.10 --verify | FileCheck %s
// CHECK: result0 f32: max abs error {{.*}} OK
// TWO: result0 f32: max abs error {{.*}} OK
// TWO: result1 f32: max abs error {{.*}} OK

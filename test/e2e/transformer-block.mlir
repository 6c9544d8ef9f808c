// Tests a generated pre-LN transformer block (LayerNorm, causal attention
// with heads split over tp, GELU MLP) on dp x tp meshes of 8, 4, 2 and 1
// ranks against the unsharded program.
// RUN: %python %par_src_root/examples/gen_transformer.py --layers 1 --batch 4 --seq 8 --dmodel 32 --heads 4 --dp 2 --tp 4 -o %t.8.mlir
// RUN: par-compile %t.8.mlir -o %t.8 && par-run -n 8 %t.8 --verify | FileCheck %s
// RUN: %python %par_src_root/examples/gen_transformer.py --layers 1 --batch 4 --seq 8 --dmodel 32 --heads 4 --dp 2 --tp 2 -o %t.4.mlir
// RUN: par-compile %t.4.mlir -o %t.4 && par-run -n 4 %t.4 --verify --seed 5 | FileCheck %s
// RUN: %python %par_src_root/examples/gen_transformer.py --layers 2 --batch 4 --seq 8 --dmodel 32 --heads 4 --dp 1 --tp 2 -o %t.2.mlir
// RUN: par-compile %t.2.mlir -o %t.2 && par-run -n 2 %t.2 --verify | FileCheck %s
// RUN: %python %par_src_root/examples/gen_transformer.py --layers 1 --batch 2 --seq 8 --dmodel 32 --heads 4 --dp 1 --tp 1 -o %t.1.mlir
// RUN: par-compile %t.1.mlir -o %t.1 && par-run -n 1 %t.1 --verify | FileCheck %s
// CHECK: result0 f32: max abs error {{.*}} OK

// Tests a generated pre-LN transformer block (LayerNorm, causal attention
// with heads split over tp, GELU MLP) on dp x tp meshes of 8, 4, 2 and 1
// ranks against the unsharded program.
// RUN: %python %par_src_root/examples/gen_transformer.py --layers 1 --batch 4 --seq 8 --dmodel 32 --heads 4 --dp 2 --tp 4 -o %t.8.mlir
// RUN: par-compile %t.8.mlir -o %t.8 && par-run -n 8 %t.8 --verify | FileCheck %s
// RUN: %python %par_src_root/examples/gen_transformer.py --layers 1 --batch 4 --seq 8 --dmodel 32 --heads 4 --dp 2 --tp 2 -o %t.4.mlir
// RUN: par-compile %t.4.mlir -o %t.4 && par-run -n 4 %t.4 --verify --seed 5 | FileCheck %s
// RUN: %python %par_src_root/examples/gen_transformer.py --layers 2 --batch 4 --seq 8 --dmodel 32 --heads 4 --dp 1 --tp 2 -o %t.2.mlir
// RUN: par-compile %t.2.mlir -o %t.2 && par-run -n 2 %t.2 --verify | FileCheck %s
// One rank: its --verify would compare the program with itself, so its
// result is compared with the 8-rank program's instead (the same block,
// annotations aside; the same inputs from the same seed).
// RUN: %python %par_src_root/examples/gen_transformer.py --layers 1 --batch 4 --seq 8 --dmodel 32 --heads 4 --dp 1 --tp 1 -o %t.1.mlir
// RUN: par-compile %t.1.mlir --no-reference -o %t.1
// RUN: rm -rf %t.1.out %t.8.out && par-run -n 1 %t.1 --seed 3 --output %t.1.out && par-run -n 8 %t.8 --seed 3 --output %t.8.out
// RUN: %python -c "import numpy as np,sys; a=np.load(sys.argv[1]); b=np.load(sys.argv[2]); e=float(np.max(np.abs(a-b))/np.max(np.abs(b))); print('1 rank vs 8 ranks: %%s, max rel error %%.1e' %% (a.shape, e)); assert a.shape == b.shape and e <= 1e-5, e" %t.1.out/result0.npy %t.8.out/result0.npy | FileCheck %s --check-prefix=ONE
// ONE: 1 rank vs 8 ranks: (4, 8, 32), max rel error
// CHECK: result0 f32: max abs error {{.*}} OK

// Tests that a generated pre-LN transformer stack sharded dp x tp
// (Megatron) needs exactly two tp all_reduces of the b x s x h activations
// per layer (after the attention output projection and after the MLP), and
// nothing else: no gathers, no data-parallel traffic in the forward pass.
// RUN: %python %par_src_root/examples/gen_transformer.py --layers 3 --batch 4 --seq 16 --dmodel 64 --heads 8 --dp 2 --tp 4 \
// RUN:   | par-opt --par-spmd=report=true -o /dev/null | FileCheck %s
// The same on a much larger mesh (heads and batch split 16 ways).
// RUN: %python %par_src_root/examples/gen_transformer.py --layers 2 --batch 32 --seq 8 --dmodel 128 --heads 16 --dp 16 --tp 16 \
// RUN:   | par-opt --par-spmd=report=true -o /dev/null | FileCheck %s --check-prefix=BIG

// CHECK:      par-comm-report: @forward
// CHECK-COUNT-6: par.all_reduce axes=["tp"] n=4 f32 tensor<32x64xf32>: 12288 bytes
// CHECK-NEXT: total: 6 collectives, 73728 bytes per device

// BIG:      par-comm-report: @forward
// BIG-COUNT-4: par.all_reduce axes=["tp"] n=16 f32 tensor<16x128xf32>: 15360 bytes
// BIG-NEXT: total: 4 collectives, 61440 bytes per device

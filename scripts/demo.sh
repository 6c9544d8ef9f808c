#!/usr/bin/env bash
# The main job: install, build, then
#  1. shard an example transformer block over a dp=2 x tp=4 mesh (printing
#     the communication report), compile it, run it on 8 local CPU ranks and
#     check it against the unsharded program;
#  2. train a character-level GPT on this README with AdamW on 8 ranks
#     (dp=2 x tp=4) for 300 steps, the loss falling step by step (a plot in
#     build/gpt/loss.svg), then sample a line of text from it. (The
#     sharded-vs-unsharded loss trajectory is checked by the test suite over
#     40 steps, test/e2e/gpt.test; over hundreds of f32 AdamW steps rounding
#     differences grow past AdamW's 1e-3 parity tolerance.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
MODEL=examples/transformer_block_dp2_tp4.mlir
echo "== par-opt $MODEL --par-spmd=report=true"
build/bin/par-opt "$MODEL" --par-spmd=report=true -o build/demo.spmd.mlir
echo "== par-compile $MODEL -o build/demo && par-run -n 8 build/demo --verify"
build/bin/par-compile "$MODEL" -o build/demo
build/bin/par-run -n 8 build/demo --verify --output build/demo/out

echo "== GPT: gen_transformer.py --gpt | par-autodiff | par-optimizer=adamw | par-compile"
python3 examples/gen_transformer.py --gpt --layers 2 --batch 8 --seq 64 \
  --dmodel 64 --heads 4 --vocab 96 --dp 2 --tp 4 -o build/gpt.mlir
build/bin/par-opt build/gpt.mlir --par-autodiff \
  "--par-optimizer=optimizer=adamw lr=0.003 weight-decay=0.0" -o build/gpt_step.mlir
build/bin/par-compile build/gpt_step.mlir -o build/gpt
echo "== par-run -n 8 build/gpt --entry gpt_step --data README.md --steps 300 --sample 120"
build/bin/par-run -n 8 build/gpt --entry gpt_step --data README.md --steps 300 \
  --loss-csv build/gpt/loss.csv --loss-plot build/gpt/loss.svg \
  --sample 120 --prompt "The " --temperature 0.7
echo "(loss per step in build/gpt/loss.csv, plotted in build/gpt/loss.svg)"

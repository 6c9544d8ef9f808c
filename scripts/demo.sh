#!/usr/bin/env bash
# The main job: install, build, then
#  1. shard an example transformer block over a dp=2 x tp=4 mesh (printing
#     the communication report), compile it, run it on 8 local CPU ranks and
#     check it against the unsharded program;
#  2. train a character-level GPT on this README with AdamW on 8 ranks in
#     3D (dp=2 x tp=2 x pp=2: two pipeline stages balanced by cost, 1F1B
#     over 4 micro-batches) in f16 mixed precision with dynamic loss scaling
#     (f32 master weights; each step prints its loss scale, and the run how
#     many steps it skipped) for 300 steps, the loss falling step by step (a
#     plot in build/gpt/loss.svg, a timeline in build/gpt/trace.json), then
#     sample a line of text from it. (The pipelined-vs-unpipelined loss
#     trajectory is checked by the test suite, test/e2e/pipeline-3d.test,
#     for every schedule.)
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

echo "== GPT on dp=2 x tp=2 x pp=2: split into 2 pipeline stages by cost, 1F1B over 4 micro-batches, f16 with dynamic loss scaling"
python3 examples/gen_transformer.py --gpt --layers 2 --batch 2 --seq 64 \
  --dmodel 64 --heads 4 --vocab 96 --dp 2 --tp 2 --pp 2 -o build/gpt.mlir
# One pipeline, one set of options (lib/Pipelines): stage split, train step,
# schedule, SPMD partitioning, lowering; report=true prints the split and
# the schedule's diagram (comm-report=true would add every function's bytes).
build/bin/par-compile build/gpt.mlir -o build/gpt \
  --options="optimizer=adamw lr=0.003 weight-decay=0.0 micro-batches=4 stages=2 schedule=1f1b precision=f16 loss-scale=dynamic report=true"
echo "== par-run -n 8 build/gpt --pipeline --data README.md --steps 300 --sample 120"
build/bin/par-run -n 8 build/gpt --pipeline --data README.md --steps 300 \
  --loss-csv build/gpt/loss.csv --loss-plot build/gpt/loss.svg \
  --trace build/gpt/trace.json --sample 120 --prompt "The " --temperature 0.7
echo "(loss per step in build/gpt/loss.csv, plotted in build/gpt/loss.svg;"
echo " the last step's timeline in build/gpt/trace.json, for Perfetto)"

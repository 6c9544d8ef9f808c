#!/usr/bin/env bash
# The main job: install, build, shard an example transformer block over a
# dp=2 x tp=4 mesh (communication report), compile it, run it on 8 local CPU
# ranks and check the result against the unsharded program.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
MODEL=examples/transformer_block_dp2_tp4.mlir
echo "== par-opt $MODEL --par-spmd=report=true"
build/bin/par-opt "$MODEL" --par-spmd=report=true -o build/demo.spmd.mlir
echo "   (SPMD program written to build/demo.spmd.mlir)"
echo "== par-compile $MODEL -o build/demo"
build/bin/par-compile "$MODEL" -o build/demo
echo "== par-run -n 8 build/demo --verify"
build/bin/par-run -n 8 build/demo --verify --output build/demo/out

#!/usr/bin/env bash
# The main job: install, build, then shard an example transformer block over
# a dp=2 x tp=4 mesh and print the SPMD program and its communication report.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
echo "== par-opt examples/transformer_block_dp2_tp4.mlir --par-spmd=report=true"
build/bin/par-opt examples/transformer_block_dp2_tp4.mlir --par-spmd=report=true

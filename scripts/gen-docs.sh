#!/usr/bin/env bash
# Regenerates docs/Dialect.md and docs/Passes.md from the ODS definitions.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh mlir-doc
cp build/docs/Par/ParDialect.md docs/Dialect.md
cp build/docs/Par/ParPasses.md docs/Passes.md

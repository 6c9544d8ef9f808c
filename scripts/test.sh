#!/usr/bin/env bash
# Installs, builds and runs every test (the lit + FileCheck suite under
# test/). lit prints failures in full and its summary last. The PyTorch
# frontend's environment (scripts/install-frontend.sh: ~5.9 GB, ~2 min from
# PyPI, reused when present) is installed too, so the par-import tests run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
bash scripts/install-frontend.sh
exec /usr/lib/llvm-22/bin/lit -sv build/test

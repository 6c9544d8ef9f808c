#!/usr/bin/env bash
# Installs, builds and runs every test (the lit + FileCheck suite under
# test/). lit prints failures in full and its summary last.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
exec /usr/lib/llvm-22/bin/lit -sv build/test

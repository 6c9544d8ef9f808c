#!/usr/bin/env bash
# Configures (once) and builds par into build/ with Ninja against Debian's
# LLVM/MLIR 22. Extra arguments are passed to ninja (e.g. a target name).
set -euo pipefail
cd "$(dirname "$0")/.."

LAUNCHER=()
if command -v ccache >/dev/null; then
  LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
if [ ! -f build/build.ninja ]; then
  cmake -G Ninja -S . -B build -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit "${LAUNCHER[@]}"
fi
ninja -C build "$@"

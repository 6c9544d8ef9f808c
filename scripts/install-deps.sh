#!/usr/bin/env bash
# Installs what par needs on a fresh Debian 12 machine: LLVM/MLIR 22 (from
# Debian's bookworm-security/backports suites), the build tools and python3
# for lit. Idempotent; skips apt when everything is already there.
set -euo pipefail

PKGS=(cmake ninja-build g++ python3 python3-venv ccache
      llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
      libopenmpi-dev openmpi-bin libopenblas-dev libzstd-dev
      libomp-22-dev                # parallel loops (OpenMP runtime)
      python3-numpy python3-torch  # the PyTorch parity tests' reference
      libgtest-dev)                # the C++ unit tests (test/unit)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"

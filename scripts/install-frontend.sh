#!/usr/bin/env bash
# Installs the PyTorch frontend's Python environment (par-import and its
# tests): a virtual environment of /usr/bin/python3 with the pinned packages
# of frontend/requirements.txt from PyPI (torch brings its CUDA libraries:
# about 5.9 GB installed, 1.5-2 min from PyPI here). It lives outside the
# clone, keyed by the requirements file's hash, and is reused when it is
# already there:
#   ${PAR_VENV_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/par}/venv-<sha256[:12]>
#   --print-path  prints that path and exits (0 whether or not it exists)
#   --check       exits 0 if it is installed and complete, 1 otherwise
set -euo pipefail
cd "$(dirname "$0")/.."
req=frontend/requirements.txt
key=$(sha256sum "$req" | cut -c1-12)
root=${PAR_VENV_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/par}
venv=$root/venv-$key
case "${1:-}" in
  --print-path) echo "$venv"; exit 0 ;;
  --check) [ -f "$venv/.par-complete" ]; exit $? ;;
  "") ;;
  *) echo "install-frontend: unknown option '$1' (--print-path, --check)" >&2; exit 2 ;;
esac
if [ -f "$venv/.par-complete" ]; then
  echo "install-frontend: reusing $venv"
  exit 0
fi
if ! /usr/bin/python3 -c "import ensurepip" 2>/dev/null; then
  echo "install-frontend: /usr/bin/python3 has no venv module (apt-get install python3-venv)" >&2
  exit 1
fi
echo "install-frontend: creating $venv (pinned packages from $req)"
rm -rf "$venv"
mkdir -p "$root"
start=$(date +%s)
/usr/bin/python3 -m venv "$venv"
# One retry: a dropped connection to PyPI should not fail the test command.
"$venv/bin/pip" install --quiet --no-input -r "$req" ||
  { echo "install-frontend: pip failed; retrying once" >&2
    "$venv/bin/pip" install --quiet --no-input -r "$req"; }
# The import that par-import needs, checked before the environment counts as installed.
"$venv/bin/python" -c "import torch, torch_mlir.fx, safetensors, transformers" 
touch "$venv/.par-complete"
echo "install-frontend: installed in $(( $(date +%s) - start )) s, $(du -sh "$venv" | cut -f1)"

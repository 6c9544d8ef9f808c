#!/usr/bin/env bash
# The GPU check (issue 13, part 6), run from inside a pack that
# scripts/pack-gpu-run.sh built, on a machine with one NVIDIA GPU (an H200),
# its driver, the CUDA 13 runtime libraries, NCCL and PyTorch 2.x; no LLVM,
# MLIR, MPI or internet needed:
#
#   bash check.sh [--dry-run] [--budget SECONDS] OUTDIR
#
# Steps (each prints PASS/FAIL/SKIP lines; outputs go to OUTDIR):
#   1. environment: nvidia-smi, driver, torch and its CUDA, which CUDA
#      libraries (cudart, cuBLAS, NCCL, libcuda) the pack's libraries resolve
#      to (env.txt, env-torch.json)
#   2. runtime: par-gpu-test (libpar_runtime_gpu.so on the driver),
#      par-runtime-test --backend cuda (every runtime kernel and collective
#      on device memory, one rank: a one-rank NCCL communicator), and
#      par-gemm-bench --check (every matmul form against a host loop) -- what
#      bench/gpu/device-check.sh does
#   3. correctness: the small GPT on the GPU against its CPU reference
#      (par-run --verify): gradients (gpt_grad), one AdamW step (every
#      result), 10 steps (the loss trajectory); f32 at --rtol 1e-4 (GPU
#      reductions reassociate), bf16 mixed precision at --rtol 2e-2
#   4. cuBLAS: bf16 GEMM TFLOP/s through par's runtime (par-gemm-bench)
#      against torch.matmul on the same shapes (gemm-par.json,
#      gemm-torch.json)
#   5. the train step: the d_model 2048 GPT in bf16 mixed precision, par-run
#      --backend cuda against PyTorch eager with autocast bf16 (same model,
#      same initial weights, same batch; the math attention par computes and,
#      for information, SDPA), ratio par/torch and MFU (train-par.txt,
#      train-torch.json)
#   6. NCCL with one rank: the one-rank CUDA context par-run -n 1 creates
#      (ncclCommInitRank with a world of 1) and par-runtime-test's
#      collectives on it
# then results.json and summary.txt (the final table, printed).
# The exit status is 1 if a functional check failed (the performance targets
# are reported as PASS/FAIL lines marked "target", but do not fail the run).
#
# --dry-run checks that the pack is complete (MANIFEST.txt: every file there
# with its size and sha256), prints each command it would run and runs none;
# exit status 0 if the pack is complete. --budget: the whole run's time limit
# in seconds (default 450; each step's timeout is cut to what is left).
set -u

die() { echo "check.sh: error: $*" >&2; exit 2; }
PACK="$(cd "$(dirname "$0")" && pwd)"
DRY=0
BUDGET=450
OUT=""
PAR_STEPS=12
PAR_WARMUP=2
TORCH_STEPS=20
TORCH_WARMUP=5
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=1; shift ;;
    --budget) [ $# -ge 2 ] || die "--budget needs seconds"; BUDGET="$2"; shift 2 ;;
    -h|--help) sed -n '2,44p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option '$1'" ;;
    *) [ -z "$OUT" ] || die "more than one OUTDIR"; OUT="$1"; shift ;;
  esac
done
[ -n "$OUT" ] || die "usage: bash check.sh [--dry-run] [--budget SECONDS] OUTDIR"
case "$BUDGET" in ''|*[!0-9]*) die "--budget needs a number of seconds" ;; esac
[ -f "$PACK/MANIFEST.txt" ] ||
  die "$PACK has no MANIFEST.txt: run check.sh from a pack built by scripts/pack-gpu-run.sh"

# --- the pack is complete ------------------------------------------------------
missing=0
files=0
while read -r path size sum; do
  case "$path" in ''|'#'*) continue ;; esac
  files=$((files + 1))
  if [ ! -f "$PACK/$path" ]; then
    echo "check.sh: missing from the pack: $path"; missing=$((missing + 1))
  elif [ "$(stat -c %s "$PACK/$path")" != "$size" ] ||
       [ "$(sha256sum "$PACK/$path" | cut -d' ' -f1)" != "$sum" ]; then
    echo "check.sh: changed in the pack (size or sha256): $path"; missing=$((missing + 1))
  fi
done <"$PACK/MANIFEST.txt"
for need in bin/par-run bin/par-gemm-bench bin/par-gpu-test bin/par-runtime-test \
            lib/libpar_runtime.so lib/libpar_runtime_cuda.so lib/libpar_runtime_gpu.so \
            torch_gpt.py artifacts/gpt-small-f32/sharded.so artifacts/gpt-small-f32/reference.so \
            artifacts/gpt-small-bf16/sharded.so artifacts/gpt-small-bf16/reference.so \
            artifacts/gpt-d2048-bf16/sharded.so artifacts/gpt-d2048-bf16/model.json; do
  if ! grep -q "^$need " "$PACK/MANIFEST.txt"; then
    echo "check.sh: the manifest lacks $need"; missing=$((missing + 1))
  fi
done
if [ "$missing" -gt 0 ]; then
  echo "check.sh: the pack is incomplete ($missing problem(s)); rebuild it with scripts/pack-gpu-run.sh"
  exit 1
fi
echo "check.sh: pack $PACK: $files files, sizes and sha256 as in MANIFEST.txt"
sed -n 's/^# warning: /check.sh: warning: /p' "$PACK/MANIFEST.txt"
if grep -q '"quick": true' "$PACK/artifacts/gpt-d2048-bf16/model.json"; then
  echo "check.sh: note: a --quick pack: the timing model is a small stand-in, not d_model 2048"
fi

# --- running or printing ------------------------------------------------------
if [ "$DRY" = 0 ]; then
  mkdir -p "$OUT" || die "cannot create $OUT"
  OUT="$(cd "$OUT" && pwd)"
  : >"$OUT/status.txt"
else
  OUT="$(realpath -m "$OUT")"
fi
deadline=$((SECONDS + BUDGET))
fails=0
PY="${PYTHON:-python3}"
PAR_LD="$PACK/lib"

# status VERDICT NAME DETAIL: a PASS/FAIL/SKIP line, also in status.txt.
status() {
  echo "$1 $2${3:+ $3}"
  [ "$DRY" = 1 ] || echo "$1 $2${3:+ $3}" >>"$OUT/status.txt"
  [ "$1" != FAIL ] || case "$2" in target-*) ;; *) fails=$((fails + 1)) ;; esac
}

# run NAME SECONDS PAR|PY CMD...: runs CMD (par's binaries with the pack's
# LD_LIBRARY_PATH, python with the machine's own) under a timeout cut to the
# budget left, output to OUTDIR/NAME.txt (and the terminal's last lines);
# sets RC. In a dry run it prints the command.
RC=0
run() {
  local name=$1 want=$2 kind=$3
  shift 3
  if [ "$DRY" = 1 ]; then
    if [ "$kind" = PAR ]; then
      echo "[dry-run] $name: LD_LIBRARY_PATH=$PACK/lib:<CUDA libraries> $*"
    else
      echo "[dry-run] $name: $PY $*"
    fi
    RC=0
    return 0
  fi
  local left=$((deadline - SECONDS - 10))
  if [ "$left" -lt 5 ]; then
    RC=124
    echo "budget spent: not run" >"$OUT/$name.txt"
    return 0
  fi
  [ "$want" -le "$left" ] || want=$left
  echo "== $name: $* (timeout ${want}s)"
  local t0=$SECONDS
  if [ "$kind" = PAR ]; then
    (cd "$PACK" && env LD_LIBRARY_PATH="$PAR_LD" timeout -k 10 "$want" "$@") >"$OUT/$name.txt" 2>&1
  else
    (cd "$PACK" && timeout -k 10 "$want" "$PY" "$@") >"$OUT/$name.txt" 2>&1
  fi
  RC=$?
  tail -n 6 "$OUT/$name.txt" | sed 's/^/   | /'
  echo "   ($name: exit $RC, $((SECONDS - t0)) s)"
  return 0
}

verdict() { # NAME DETAIL-ON-FAIL: PASS if RC is 0, else FAIL (SKIP if the budget ran out)
  if [ "$DRY" = 1 ]; then return 0; fi
  if [ "$RC" = 0 ]; then status PASS "$1" "${3:-}"
  elif [ "$RC" = 124 ] && grep -q "^budget spent" "$OUT/$1.txt" 2>/dev/null; then
    status SKIP "$1" "(time budget spent)"
  elif [ "$RC" = 124 ] || [ "$RC" = 137 ]; then status FAIL "$1" "(timed out; $1.txt)"
  else status FAIL "$1" "(exit $RC; ${2:-see $1.txt})"
  fi
}

# --- 1. environment --------------------------------------------------------
echo "check.sh: 1. environment"
if [ "$DRY" = 1 ]; then
  echo "[dry-run] env: nvidia-smi; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv"
  echo "[dry-run] env: find the CUDA libraries (\$CUDA_HOME/lib64, /usr/local/cuda*/lib64, PyTorch's nvidia wheels) and ldd lib/libpar_runtime_cuda.so lib/libpar_runtime_gpu.so bin/par-run artifacts/*/sharded.so"
  echo "[dry-run] env: $PY -c 'import torch; ...' (version, CUDA, device)"
else
  {
    echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  host: $(uname -n) $(uname -r)"
    echo "# glibc: $(ldd --version 2>&1 | head -1)"
    echo "# nvidia-smi"; nvidia-smi 2>&1
    echo "# query"; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
  } >"$OUT/env.txt"
  if nvidia-smi -L >/dev/null 2>&1; then
    status PASS env-gpu "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
  else
    status FAIL env-gpu "(nvidia-smi lists no GPU)"
  fi
  # The CUDA libraries the pack leaves to this machine.
  cuda_dirs=""
  for d in ${CUDA_HOME:+$CUDA_HOME/lib64} ${CUDA_PATH:+$CUDA_PATH/lib64} /usr/local/cuda/lib64 \
           /usr/local/cuda-13*/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    if [ -d "$d" ] && ls "$d"/libcudart.so.13 "$d"/libcublas.so.13 "$d"/libnccl.so.2 >/dev/null 2>&1; then
      case ":$cuda_dirs:" in *":$d:"*) ;; *) cuda_dirs="${cuda_dirs:+$cuda_dirs:}$d" ;; esac
    fi
  done
  PAR_LD="$PACK/lib${cuda_dirs:+:$cuda_dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # Still missing: PyTorch's nvidia-* wheels may hold them (NCCL above all).
  for lib in $(LD_LIBRARY_PATH="$PAR_LD" ldd "$PACK/lib/libpar_runtime_cuda.so" 2>/dev/null |
               awk '/not found/ {print $1}'); do
    found=$("$PY" -c 'import site; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null |
            while read -r sp; do [ -d "$sp/nvidia" ] && find "$sp/nvidia" -name "$lib" 2>/dev/null; done | head -1)
    if [ -n "$found" ]; then
      PAR_LD="$PAR_LD:$(dirname "$found")"
      echo "# $lib from PyTorch's wheels: $found" >>"$OUT/env.txt"
    fi
  done
  if LD_LIBRARY_PATH="$PAR_LD" ldd "$PACK/bin/par-run" 2>&1 | grep -q "version .*not found"; then
    PAR_LD="$PACK/lib:$PACK/lib/compat:${PAR_LD#"$PACK/lib:"}"
    echo "# this machine's libstdc++ is too old: using lib/compat" >>"$OUT/env.txt"
  fi
  echo "# LD_LIBRARY_PATH for par: $PAR_LD" >>"$OUT/env.txt"
  unresolved=""
  for f in lib/libpar_runtime_cuda.so lib/libpar_runtime_gpu.so lib/libpar_runtime.so bin/par-run \
           bin/par-gemm-bench artifacts/*/sharded.so artifacts/*/reference.so; do
    [ -f "$PACK/$f" ] || continue
    echo "# ldd $f" >>"$OUT/env.txt"
    LD_LIBRARY_PATH="$PAR_LD" ldd "$PACK/$f" >>"$OUT/env.txt" 2>&1
    for m in $(LD_LIBRARY_PATH="$PAR_LD" ldd "$PACK/$f" 2>&1 | awk '/not found/ {print $1}'); do
      case " $unresolved " in *" $m "*) ;; *) unresolved="$unresolved $m" ;; esac
    done
  done
  resolved=$(LD_LIBRARY_PATH="$PAR_LD" ldd "$PACK/lib/libpar_runtime_cuda.so" "$PACK/lib/libpar_runtime_gpu.so" 2>/dev/null |
             awk '/=> \// && /libcuda\.|libcudart|libcublas|libnccl/ {print $1 "=" $3}' | sort -u | tr '\n' ' ')
  if [ -z "$unresolved" ]; then
    status PASS env-libs "$resolved"
  else
    status FAIL env-libs "(not found:$unresolved; install the CUDA 13 runtime, cuBLAS and NCCL, or set CUDA_HOME)"
  fi
  if "$PY" -c '
import json, sys, torch
ok = torch.cuda.is_available()
info = {"torch": torch.__version__, "cuda": torch.version.cuda, "available": ok,
        "device": torch.cuda.get_device_name(0) if ok else None,
        "capability": list(torch.cuda.get_device_capability(0)) if ok else None,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())) if ok else None}
json.dump(info, open(sys.argv[1], "w"))
print(json.dumps(info))
sys.exit(0 if ok else 1)' "$OUT/env-torch.json" >>"$OUT/env.txt" 2>&1; then
    status PASS env-torch "$(cat "$OUT/env-torch.json")"
  else
    status FAIL env-torch "(PyTorch with CUDA not usable; env.txt)"
  fi
fi

# --- 2. runtime ------------------------------------------------------------------
echo "check.sh: 2. runtime"
run gpu-test 60 PAR bin/par-gpu-test
[ "$DRY" = 1 ] || { [ "$RC" != 0 ] || grep -q "gpu: available" "$OUT/gpu-test.txt" || RC=3; }
verdict gpu-test "libpar_runtime_gpu.so on the driver"
run runtime-test 120 PAR bin/par-runtime-test --backend cuda --world local --expect-no-mpi
[ "$DRY" = 1 ] || { [ "$RC" != 0 ] || grep -q "backend cuda" "$OUT/runtime-test.txt" || RC=3; }
verdict runtime-test "runtime kernels and collectives on the device"
run gemm-check 90 PAR bin/par-gemm-bench --check --shape 1024x1024x1024 --iters 5
verdict gemm-check

# --- 3. correctness ------------------------------------------------------------
echo "check.sh: 3. correctness (GPU vs the CPU reference)"
for dt in f32 bf16; do
  art="artifacts/gpt-small-$dt"
  rtol=1e-4
  [ "$dt" = f32 ] || rtol=2e-2
  base=(bin/par-run -n 1 "$art" --backend cuda --verify --rtol "$rtol")
  run "verify-$dt-grad" 120 PAR "${base[@]}" --entry gpt_grad
  verdict "verify-$dt-grad"
  run "verify-$dt-step" 120 PAR "${base[@]}" --entry gpt_step --steps 1
  verdict "verify-$dt-step"
  run "verify-$dt-steps" 120 PAR "${base[@]}" --entry gpt_step --steps 10
  verdict "verify-$dt-steps"
done

# --- 4. cuBLAS -----------------------------------------------------------------
echo "check.sh: 4. cuBLAS: bf16 GEMM, par's runtime vs torch.matmul"
SHAPES=(4096x4096x4096 8192x8192x8192 4096x11008x4096 8192x2048x2048 8192x8192x2048 8192x2048x8192)
shape_args=()
for s in "${SHAPES[@]}"; do shape_args+=(--shape "$s"); done
run gemm-par 120 PAR bin/par-gemm-bench "${shape_args[@]}" --iters 20 --json "$OUT/gemm-par.json"
verdict gemm-par
run gemm-par-tf32 60 PAR env PAR_CUDA_TF32=1 bin/par-gemm-bench --shape 8192x8192x8192 --iters 20 \
  --json "$OUT/gemm-par-tf32.json"
verdict gemm-par-tf32
run gemm-torch 120 PY torch_gpt.py gemm "${shape_args[@]}" --iters 20 --json "$OUT/gemm-torch.json"
verdict gemm-torch

# --- 5. the train step -----------------------------------------------------------
echo "check.sh: 5. the train step: GPT d_model 2048, bf16, par vs PyTorch eager"
big=artifacts/gpt-d2048-bf16
[ "$DRY" = 1 ] || cp "$PACK/$big/model.json" "$OUT/model-d2048.json"
run batch 60 PY torch_gpt.py batch --model "$big/model.json" --out "$OUT/batch"
verdict batch
# PyTorch first (about a minute): par gets what is left of the budget.
run train-torch 150 PY torch_gpt.py train --model "$big/model.json" --batch-dir "$OUT/batch" \
  --steps "$TORCH_STEPS" --warmup "$TORCH_WARMUP" --attention math,sdpa --json "$OUT/train-torch.json"
verdict train-torch
run train-par 240 PAR bin/par-run -n 1 "$big" --backend cuda --entry gpt_step --steps "$PAR_STEPS" \
  --input "arg0=$OUT/batch/tokens.npy" --input "arg1=$OUT/batch/targets.npy" \
  --loss-csv "$OUT/train-par-loss.csv"
verdict train-par

# --- 6. NCCL, one rank ---------------------------------------------------------
echo "check.sh: 6. NCCL with one rank"
if [ "$DRY" = 1 ]; then
  echo "[dry-run] nccl-1rank: from runtime-test (collectives on a one-rank NCCL communicator) and the par-run --backend cuda runs above (ncclCommInitRank, world 1)"
else
  if grep -q "backend cuda" "$OUT/runtime-test.txt" 2>/dev/null &&
     grep -q "^PASS runtime-test" "$OUT/status.txt" &&
     grep -q "^step 1/" "$OUT/train-par.txt" 2>/dev/null; then
    status PASS nccl-1rank "one-rank NCCL context (par-run -n 1 --backend cuda) and its collectives (par-runtime-test)"
  else
    status FAIL nccl-1rank "(runtime-test or the par-run cuda train step did not get through; see them)"
  fi
fi

# --- results --------------------------------------------------------------------
if [ "$DRY" = 1 ]; then
  echo "[dry-run] report: $PY torch_gpt.py report OUTDIR --par-warmup $PAR_WARMUP (results.json, summary.txt)"
  echo "check.sh: dry run complete: the pack is complete; nothing was run; results would go to $OUT"
  exit 0
fi
(cd "$PACK" && "$PY" torch_gpt.py report "$OUT" --par-warmup "$PAR_WARMUP") || status FAIL report "(torch_gpt.py report failed)"
echo "check.sh: $fails functional check(s) failed; results in $OUT (summary.txt, results.json)"
[ "$fails" = 0 ]

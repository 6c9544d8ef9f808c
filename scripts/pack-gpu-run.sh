#!/usr/bin/env bash
# Builds the portable pack for one GPU run (issue 13, part 4): everything
# bench/gpu/check.sh needs on a machine with the NVIDIA driver, the CUDA
# runtime libraries and PyTorch, but no LLVM, MLIR, MPI or internet.
#
#   scripts/pack-gpu-run.sh OUTDIR [--build DIR] [--cuda-toolkit DIR]
#                           [--quick] [-j N]
#
# OUTDIR (new or empty) receives:
#   check.sh torch_gpt.py          the GPU check and its PyTorch side
#   bin/   par-run par-gemm-bench par-gpu-test par-runtime-test
#   lib/   libpar_runtime{,_cuda,_gpu}.so and the non-system libraries they
#          and the artifacts need (OpenBLAS, libgfortran, libquadmath)
#   lib/compat/  libstdc++ and libgcc_s of this machine, used by check.sh
#          only when the GPU machine's own are too old
#   artifacts/gpt-small-f32   small GPT AdamW train step, f32, + CPU reference
#   artifacts/gpt-small-bf16  the same with precision=bf16, + CPU reference
#   artifacts/gpt-d2048-bf16  GPT d_model 2048 (timing), bf16, no reference
#       (--quick: artifacts/gpt-d2048-bf16 holds a small stand-in instead,
#        for tests; its model.json says "quick": true)
#   each with model.mlir (the generator's output) and model.json (config,
#   optimizer, FLOPs per step)
#   MANIFEST.txt   path, size, sha256 of every file (check.sh verifies it)
#
# Never copied: glibc, libcuda (the driver), the CUDA toolkit's libraries
# (cudart, cuBLAS/cuBLASLt, NCCL: the GPU machine's own; check.sh reports
# them missing), libpar_runtime_mpi.so and anything of MPI/LLVM/MLIR. The
# script fails if the toolkit or libpar_runtime_gpu.so is missing, if any
# file of the pack (or its ldd with LD_LIBRARY_PATH=OUTDIR/lib) names
# libLLVM/libMLIR/libmpi, or if the pack exceeds 64 MiB.
set -euo pipefail

die() { echo "pack-gpu-run.sh: error: $*" >&2; exit 1; }
note() { echo "pack-gpu-run.sh: $*"; }

REPO="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="$REPO/build"
TOOLKIT="${CUDA_TOOLKIT:-/usr/local/cuda}"
QUICK=0
JOBS=2
OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) [ $# -ge 2 ] || die "--build needs a directory"; BUILD="$2"; shift 2 ;;
    --cuda-toolkit) [ $# -ge 2 ] || die "--cuda-toolkit needs a directory"; TOOLKIT="$2"; shift 2 ;;
    --quick) QUICK=1; shift ;;
    -j) [ $# -ge 2 ] || die "-j needs a number"; JOBS="$2"; shift 2 ;;
    -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option '$1'" ;;
    *) [ -z "$OUT" ] || die "more than one OUTDIR ('$OUT', '$1')"; OUT="$1"; shift ;;
  esac
done
[ -n "$OUT" ] || die "usage: scripts/pack-gpu-run.sh OUTDIR [--build DIR] [--cuda-toolkit DIR] [--quick] [-j N]"
case "$JOBS" in ''|*[!0-9]*|0) die "-j needs a positive number, got '$JOBS'" ;; esac
LIMIT=$((64 * 1024 * 1024))

# --- what the pack is made from ---------------------------------------------
[ -d "$TOOLKIT" ] || die "CUDA toolkit not found at '$TOOLKIT' (--cuda-toolkit DIR)"
for f in bin/ptxas bin/fatbinary nvvm/libdevice/libdevice.10.bc lib64/stubs/libcuda.so; do
  [ -e "$TOOLKIT/$f" ] || die "CUDA toolkit at '$TOOLKIT' lacks $f (par-compile --target cuda needs it)"
done
BUILD="$(cd "$BUILD" 2>/dev/null && pwd)" || die "build directory not found"
[ -f "$BUILD/lib/libpar_runtime_gpu.so" ] ||
  die "$BUILD/lib/libpar_runtime_gpu.so is missing (configure par with the CUDA toolkit and build it)"
[ -f "$BUILD/lib/libpar_runtime_cuda.so" ] ||
  die "$BUILD/lib/libpar_runtime_cuda.so is missing (the CUDA backend: needs cuBLAS and NCCL at build time)"
for f in bin/par-compile bin/par-run bin/par-gemm-bench bin/par-gpu-test bin/par-runtime-test \
         lib/libpar_runtime.so; do
  [ -x "$BUILD/$f" ] || [ -f "$BUILD/$f" ] || die "$BUILD/$f is missing (build par first: scripts/build.sh)"
done
command -v python3 >/dev/null || die "python3 is needed to generate the models"
command -v sha256sum >/dev/null || die "sha256sum is needed for MANIFEST.txt"

if [ -e "$OUT" ] && [ -n "$(ls -A "$OUT" 2>/dev/null)" ]; then
  die "'$OUT' exists and is not empty"
fi
mkdir -p "$OUT"/bin "$OUT"/lib/compat "$OUT"/artifacts
OUT="$(cd "$OUT" && pwd)"

# --- the artifacts ------------------------------------------------------------
# name|purpose|reference|generator args|compile options
LR_SMALL=0.001
LR_BIG=0.0003
OPT="beta1=0.9 beta2=0.999 eps=1e-08 weight-decay=0.01"
SMALL="--layers 2 --batch 4 --seq 32 --dmodel 64 --heads 4 --vocab 96"
if [ "$QUICK" = 1 ]; then
  BIG="--layers 1 --batch 2 --seq 64 --dmodel 128 --heads 4 --vocab 256"
else
  BIG="--layers 4 --batch 8 --seq 1024 --dmodel 2048 --heads 16 --vocab 8192"
fi
SPECS=(
  "gpt-small-f32|correctness|1|$SMALL|optimizer=adamw lr=$LR_SMALL $OPT"
  "gpt-small-bf16|correctness|1|$SMALL|optimizer=adamw lr=$LR_SMALL $OPT precision=bf16"
  "gpt-d2048-bf16|timing|0|$BIG|optimizer=adamw lr=$LR_BIG $OPT precision=bf16"
)

# model.json: the configuration check.sh and torch_gpt.py read.
write_model_json() { # DIR PURPOSE REFERENCE GENARGS OPTIONS
  python3 - "$@" "$QUICK" <<'EOF'
import json, re, sys
d, purpose, ref, gen, opts, quick = sys.argv[1:7]
g = dict(re.findall(r"--(\w+) (\S+)", gen))
o = dict(kv.split("=", 1) for kv in opts.split())
cfg = {k: int(g[k]) for k in ("layers", "batch", "seq", "dmodel", "heads", "vocab")}
cfg["ffn"] = 4 * cfg["dmodel"]
B, S, L, D, F, V = (cfg[k] for k in ("batch", "seq", "layers", "dmodel", "ffn", "vocab"))
weights = L * (4 * D * D + 2 * D * F) + D * V
params = weights + V * D + S * D + L * 4 * D + 2 * D
flops = 6 * B * S * weights + 12 * L * B * S * S * D
cfg.update({
    "name": d.rstrip("/").split("/")[-1], "purpose": purpose,
    "reference": ref == "1", "quick": quick == "1" and purpose == "timing",
    "dtype": "f32", "precision": o.get("precision", "f32"), "entry": "gpt_step",
    "embedding": "gather", "target": "cuda:sm_90",
    "optimizer": {"name": "adamw", "lr": float(o["lr"]), "beta1": float(o["beta1"]),
                  "beta2": float(o["beta2"]), "eps": float(o["eps"]),
                  "weight_decay": float(o["weight-decay"])},
    "generator": "examples/gen_transformer.py --gpt " + gen + " --dp 1 --tp 1",
    "compile_options": opts, "params": params, "matmul_params": weights,
    "tokens_per_step": B * S, "flops_per_step": flops,
    "flops_formula": "6*B*S*(L*(4*D^2 + 2*D*F) + D*V) + 12*L*B*S^2*D",
})
json.dump(cfg, open(d + "/model.json", "w"), indent=1)
print("pack-gpu-run.sh: %s: %d parameters, %.4g FLOPs per step" % (cfg["name"], params, flops))
EOF
}

compile_one() { # SPEC
  local name purpose ref gen opts dir
  IFS='|' read -r name purpose ref gen opts <<<"$1"
  dir="$OUT/artifacts/$name"
  mkdir -p "$dir"
  # shellcheck disable=SC2086
  python3 "$REPO/examples/gen_transformer.py" --gpt $gen --dp 1 --tp 1 -o "$dir/model.mlir"
  local args=("$dir/model.mlir" --target cuda:sm_90 --cuda-toolkit "$TOOLKIT"
              --options "$opts" -o "$dir")
  [ "$ref" = 1 ] || args+=(--no-reference)
  local t0=$SECONDS
  if ! "$BUILD/bin/par-compile" "${args[@]}" >"$dir/compile.log" 2>&1; then
    cat "$dir/compile.log" >&2
    echo "pack-gpu-run.sh: error: par-compile failed for $name" >&2
    return 1
  fi
  rm -f "$dir/sharded.mlir" "$dir/compile.log" # not needed to run
  write_model_json "$dir" "$purpose" "$ref" "$gen" "$opts"
  note "$name compiled in $((SECONDS - t0)) s"
}

pids=()
names=()
for spec in "${SPECS[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do sleep 1; done
  compile_one "$spec" &
  pids+=($!)
  names+=("${spec%%|*}")
done
failed=0
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || { echo "pack-gpu-run.sh: error: ${names[$i]} failed" >&2; failed=1; }
done
[ "$failed" = 0 ] || exit 1
for spec in "${SPECS[@]}"; do
  name="${spec%%|*}"
  [ -f "$OUT/artifacts/$name/sharded.so" ] || die "$name: no sharded.so"
  grep -q '"target": "cuda:sm_90"' "$OUT/artifacts/$name/sharded.json" ||
    die "$name: sharded.json does not say target cuda:sm_90"
done

# --- par's binaries and libraries ---------------------------------------------
for b in par-run par-gemm-bench par-gpu-test par-runtime-test; do
  cp "$BUILD/bin/$b" "$OUT/bin/"
done
for l in libpar_runtime.so libpar_runtime_cuda.so libpar_runtime_gpu.so; do
  cp "$BUILD/lib/$l" "$OUT/lib/"
done
cp "$REPO/bench/gpu/check.sh" "$REPO/bench/gpu/torch_gpt.py" "$OUT/"
chmod +x "$OUT/check.sh"

# The shared libraries everything needs: copy what a GPU machine may lack.
forbidden='libLLVM|libMLIR|libmlir|libmpi|libopen-rte|libopen-pal'
elves() { find "$OUT/bin" "$OUT/lib" "$OUT/artifacts" -type f \( -name '*.so*' -o -perm -u+x \) \
            ! -name '*.json' ! -name '*.mlir' | sort; }
declare -A seen=()
while read -r f; do
  while read -r soname path; do
    [ -n "$soname" ] || continue
    case "$soname" in
      linux-vdso.so*|ld-linux*|libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libutil.so*|libresolv.so*|libmvec.so*)
        continue ;; # glibc: the machine's own
      libcuda.so*|libnvidia-*) continue ;; # the driver
      libcudart.so*|libcublas.so*|libcublasLt.so*|libnccl.so*|libnvrtc*|libnvJitLink*|libcudnn*)
        continue ;; # the CUDA toolkit: the machine's own
      libpar_runtime*) continue ;; # copied above
    esac
    if [[ "$soname" =~ $forbidden ]]; then
      die "$f needs $soname: the pack must not need LLVM, MLIR or MPI"
    fi
    [ -z "${seen[$soname]:-}" ] || continue
    [ "$path" != "not" ] && [ -f "$path" ] || die "$f needs $soname, which does not resolve here"
    case "$path" in "$TOOLKIT"/*) continue ;; esac
    seen[$soname]=1
    case "$soname" in
      libstdc++.so*|libgcc_s.so*) cp -L "$path" "$OUT/lib/compat/$soname" ;;
      *) cp -L "$path" "$OUT/lib/$soname" ;;
    esac
  done < <(LD_LIBRARY_PATH="$BUILD/lib" ldd "$f" 2>/dev/null |
           awk '/=>/ {print $1, $3}')
done < <(elves)
chmod 644 "$OUT"/lib/*.so* "$OUT"/lib/compat/*.so* 2>/dev/null || true

# --- audit ---------------------------------------------------------------------
if find "$OUT" -type f | grep -E "$forbidden" >/dev/null; then
  die "the pack contains $(find "$OUT" -type f | grep -E "$forbidden" | head -1)"
fi
while read -r f; do
  if LD_LIBRARY_PATH="$OUT/lib" ldd "$f" 2>/dev/null | grep -E "$forbidden" >/dev/null; then
    die "ldd $f lists $(LD_LIBRARY_PATH="$OUT/lib" ldd "$f" | grep -E "$forbidden" | head -1)"
  fi
done < <(elves)
# The newest symbol versions needed (lib/compat aside: it is used only
# where the machine's libstdc++ is older).
glibc=$(elves | grep -v /lib/compat/ | xargs objdump -T 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
glibcxx=$(elves | grep -v /lib/compat/ | xargs objdump -T 2>/dev/null | grep -o 'GLIBCXX_[0-9.]*' | sort -uV | tail -1)
compat_glibc=$(find "$OUT/lib/compat" -type f | xargs -r objdump -T 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)

# A par-run from before `par-run --backend cuda` refuses every cuda
# artifact: the check's GPU runs would all fail.
warning=""
if grep -q "par-compile has no GPU target yet" "$OUT/bin/par-run"; then
  warning="this par-run refuses cuda artifacts (built before par-run --backend cuda): the GPU runs of check.sh will fail; rebuild par and the pack"
  echo "pack-gpu-run.sh: warning: $warning" >&2
fi

# --- MANIFEST.txt ------------------------------------------------------------
commit=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$REPO" status --porcelain 2>/dev/null | grep -qv '^??' && echo "+changes" || true)
{
  echo "# par GPU pack (scripts/pack-gpu-run.sh$([ "$QUICK" = 1 ] && echo ' --quick')), par $commit$dirty, built $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -m)"
  echo "# needs on the GPU machine: NVIDIA driver (libcuda.so.1), CUDA 13 runtime libraries"
  echo "#   (libcudart.so.13, libcublas.so.13, libcublasLt.so.13) and NCCL (libnccl.so.2),"
  echo "#   glibc >= ${glibc#GLIBC_}, libstdc++ with $glibcxx (else lib/compat's, which needs glibc >= ${compat_glibc#GLIBC_}),"
  echo "#   python3 and PyTorch 2.x with CUDA"
  echo "# run: bash check.sh OUTDIR   (bash check.sh --dry-run OUTDIR: what it would run)"
  [ -z "$warning" ] || echo "# warning: $warning"
  echo "# path size sha256"
  (cd "$OUT" && find . -type f ! -name MANIFEST.txt | sed 's|^\./||' | sort | while read -r f; do
     printf '%s %s %s\n' "$f" "$(stat -c %s "$f")" "$(sha256sum "$f" | cut -d' ' -f1)"
   done)
} >"$OUT/MANIFEST.txt"

total=$(find "$OUT" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
if [ "$total" -gt "$LIMIT" ]; then
  die "the pack is $total bytes, over 64 MiB ($LIMIT)"
fi
note "wrote $OUT: $(grep -vc '^#' "$OUT/MANIFEST.txt") files, $total bytes ($(awk -v t="$total" 'BEGIN {printf "%.1f", t / 1048576}') MiB of 64)"

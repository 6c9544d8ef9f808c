#!/usr/bin/env bash
# The GPU checks of the runtime's CUDA pieces, for a machine with a GPU that
# received this build's runtime (no LLVM/MPI needed there). Carry:
#   build/lib/libpar_runtime.so build/lib/libpar_runtime_cuda.so
#   build/lib/libpar_runtime_gpu.so build/bin/par-gpu-test
#   build/bin/par-gemm-bench
# and run from the repository root: bash bench/gpu/device-check.sh [OUTDIR]
# 1. the libraries resolve (driver, cuBLAS, NCCL, OpenBLAS),
# 2. par-gpu-test: libpar_runtime_gpu.so on the real driver,
# 3. par-gemm-bench --check: every matmul form against a host loop,
# 4. GEMM throughput, f32 in full precision and with PAR_CUDA_TF32=1.
set -u
out=${1:-${OUT:-/tmp}}
export LD_LIBRARY_PATH="$PWD/build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
status=0
nvidia-smi -L || true
for lib in build/lib/libpar_runtime.so build/lib/libpar_runtime_cuda.so \
           build/lib/libpar_runtime_gpu.so; do
  if ldd "$lib" | grep "not found"; then
    echo "device-check: $lib has unresolved libraries"; status=1
  fi
done
echo "== par-gpu-test"; build/bin/par-gpu-test || status=1
echo "== par-gemm-bench --check"
build/bin/par-gemm-bench --check --shape 1024x1024x1024 --iters 5 || status=1
echo "== par-gemm-bench"
build/bin/par-gemm-bench --shape 4096x4096x4096 --shape 8192x8192x8192 \
  --shape 4096x11008x4096 --iters 20 --json "$out/gemm.json" || status=1
PAR_CUDA_TF32=1 build/bin/par-gemm-bench --shape 8192x8192x8192 --iters 20 \
  --json "$out/gemm-tf32.json" || status=1
echo "device-check: status $status"
exit $status

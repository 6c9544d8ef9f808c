# -*- Python -*-
import os
import shutil
import subprocess
import sys

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "PAR"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.par_obj_root, "test")
config.excludes = ["lib", "CMakeLists.txt", "README.md", "lit.cfg.py", "lit.site.cfg.py", "Inputs", "no-crash.py", "chunk.py", "make_npy.py", "gradcheck.py", "optimcheck.py", "torch_parity.py", "gpt_torch_parity.py", "concurrent_launch.py", "embedding_gather_check.py", "compress_check.py", "compress_train.py", "mpirun.sh", "extract_ptx.py", "compare_prints.py", "recompute_check.py", "check_pipeline.py"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%par_src_root", config.par_src_root))
config.substitutions.append(("%par_tools_dir", config.par_tools_dir))

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

tool_dirs = [config.par_tools_dir, config.llvm_tools_dir]
tools = ["par-opt", "par-pipeline-sim", "par-plan", "par-compile", "par-run", "not", "count", "FileCheck", "mlir-translate", "mlir-runner", "llc", "opt"]
llvm_config.add_tool_substitutions(tools, tool_dirs)
# MLIR's JIT runner libraries (mlir-22-tools), for tests that run lowered
# code in process (mlir-runner -shared-libs=...).
_llvm_lib_dir = os.path.join(os.path.dirname(config.llvm_tools_dir), "lib")
for _lib in ["mlir_runner_utils", "mlir_c_runner_utils"]:
    config.substitutions.append(("%" + _lib, os.path.join(_llvm_lib_dir, "lib" + _lib + ".so")))

# Runtime tests (test/Runtime): MPI jobs on this machine. Open MPI refuses to
# run as root (containers, CI) unless told, and refuses more ranks than cores
# unless oversubscription is allowed; one BLAS thread per rank keeps
# oversubscribed jobs from thrashing.
config.environment["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
config.environment["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
config.environment["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
config.environment["OPENBLAS_NUM_THREADS"] = "1"
# par-run gives a rank the host's cores over its ranks by default; the suite
# runs tests side by side, so each rank keeps one thread.
config.environment["OMP_NUM_THREADS"] = "1"
# par-compile's compile cache: one for the suite, in the build tree (not the
# user's ~/.cache/par/compile). Tests that compile the same model with the
# same options share artifacts; entries are keyed by par's own binaries, so
# a rebuilt par never reads an older par's entry, and the cache is safe
# under lit's parallel tests (lib/Pipelines/CompileCache.h).
config.environment["PAR_COMPILE_CACHE"] = os.path.join(config.par_obj_root, "test", "compile-cache")
config.substitutions.append(("%mpirun", "sh " + os.path.join(config.par_src_root, "test", "mpirun.sh")))
config.substitutions.append(("%par_lib_dir", os.path.join(config.par_obj_root, "lib")))
llvm_config.add_tool_substitutions(["par-runtime-test", "par-session-test", "llvm-nm"], tool_dirs)

# Features: what this machine has. A test that needs a missing component
# says REQUIRES: <feature> (or its folder's lit.local.cfg does) and reports
# UNSUPPORTED instead of passing silently.
#   mpi    mpirun on PATH (multi-rank jobs: test/Runtime, test/e2e)
#   torch  PyTorch importable by %python (the parity tests' reference)
#   cuda-device  a usable NVIDIA GPU (nvidia-smi lists one); also "cuda"
#   gtest  the C++ unit tests were built (GoogleTest found)
#   cuda-toolkit  the CUDA libraries (libpar_runtime_cuda.so,
#          libpar_runtime_gpu.so) and tools (par-gpu-test, par-gemm-bench)
#          were built: a toolkit was found, a GPU is not needed.
#          %cuda_driver_dir is the directory of its libcuda (the stub).
#   torch-mlir  the frontend environment (scripts/install-frontend.sh: torch
#          2.15, torch-mlir, transformers) is installed: par-import works;
#          %torch_python is its Python (with python/ on PYTHONPATH).
def _succeeds(cmd):
    try:
        return subprocess.run(cmd, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False

if shutil.which("mpirun"):
    config.available_features.add("mpi")
if _succeeds([sys.executable, "-c", "import torch"]):
    config.available_features.add("torch")
_frontend_venv = subprocess.run(
    ["bash", os.path.join(config.par_src_root, "scripts", "install-frontend.sh"),
     "--print-path"], capture_output=True, text=True).stdout.strip()
# par-import (a launcher) finds the environment the way lit did here.
for _v in ("PAR_VENV_ROOT", "XDG_CACHE_HOME", "HOME"):
    if _v in os.environ:
        config.environment[_v] = os.environ[_v]
if _frontend_venv and os.path.exists(os.path.join(_frontend_venv, ".par-complete")):
    config.available_features.add("torch-mlir")
config.substitutions.append(
    ("%torch_python", "env PYTHONPATH=%s %s" % (
        os.path.join(config.par_src_root, "python"),
        os.path.join(_frontend_venv, "bin", "python"))))
llvm_config.add_tool_substitutions(["par-import"], tool_dirs)
if shutil.which("nvidia-smi") and _succeeds(["nvidia-smi", "-L"]):
    config.available_features.add("cuda")
    config.available_features.add("cuda-device")
if os.path.exists(os.path.join(config.par_tools_dir, "par-unit-tests")):
    config.available_features.add("gtest")
llvm_config.add_tool_substitutions(["par-unit-tests"], tool_dirs)
if str(getattr(config, "par_have_cuda_toolkit", "")).upper() in ("1", "ON", "TRUE"):
    config.available_features.add("cuda-toolkit")
config.substitutions.append(("%cuda_driver_dir", getattr(config, "par_cuda_driver_dir", "")))
llvm_config.add_tool_substitutions(["par-gpu-test", "par-gemm-bench"], tool_dirs)
config.substitutions.append(("%cuda_toolkit", getattr(config, "par_cuda_root", "/usr/local/cuda")))
# What the CUDA backend must do here, as a FileCheck prefix: run (a GPU),
# refuse with "unavailable" (built, no GPU), or say it was not built; the
# runtime tests check the one outcome this machine allows, not any of them.
config.substitutions.append(("%cuda_outcome",
    "GPU" if "cuda-device" in config.available_features else
    "NOGPU" if "cuda-toolkit" in config.available_features else "NOTBUILT"))

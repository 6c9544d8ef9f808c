# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "PAR"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.par_obj_root, "test")
config.excludes = ["CMakeLists.txt", "README.md", "lit.cfg.py", "lit.site.cfg.py", "Inputs", "no-crash.py", "chunk.py", "make_npy.py", "gradcheck.py", "optimcheck.py", "torch_parity.py", "gpt_torch_parity.py", "concurrent_launch.py", "embedding_gather_check.py", "mpirun.sh"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%par_src_root", config.par_src_root))

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

tool_dirs = [config.par_tools_dir, config.llvm_tools_dir]
tools = ["par-opt", "par-pipeline-sim", "par-compile", "par-run", "not", "count", "FileCheck", "mlir-translate"]
llvm_config.add_tool_substitutions(tools, tool_dirs)

# Runtime tests (test/Runtime): MPI jobs on this machine. Open MPI refuses to
# run as root (containers, CI) unless told, and refuses more ranks than cores
# unless oversubscription is allowed; one BLAS thread per rank keeps
# oversubscribed jobs from thrashing.
config.environment["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
config.environment["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
config.environment["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
config.environment["OPENBLAS_NUM_THREADS"] = "1"
config.substitutions.append(("%mpirun", "sh " + os.path.join(config.par_src_root, "test", "mpirun.sh")))
config.substitutions.append(("%par_lib_dir", os.path.join(config.par_obj_root, "lib")))
llvm_config.add_tool_substitutions(["par-runtime-test", "llvm-nm"], tool_dirs)

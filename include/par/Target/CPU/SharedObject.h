//===- SharedObject.h - LLVM dialect to a loadable shared object -*- C++ -*-===//
//
// The last steps of the CPU target, in process: translate a module in the
// LLVM dialect to LLVM IR, inline the entry points into their C
// interfaces, split the module into parts by function (host code in one,
// unoptimised; the kernels spread over the others), optimise each kernel
// part (O3, vectorisers on, no unrolling, for the host CPU) and emit each
// part's object file with the host's TargetMachine on a pool of threads,
// and link the objects into a shared object against the par runtime with
// the system C++ driver ($CXX or c++).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TARGET_CPU_SHAREDOBJECT_H
#define PAR_TARGET_CPU_SHAREDOBJECT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <string>
#include <vector>

namespace mlir::par {

struct SharedObjectOptions {
  /// Directory holding libpar_runtime.so (linked, and the rpath). The
  /// runtime also provides memrefCopy (strided copies), so an artifact
  /// needs no MLIR library at run time.
  std::string runtimeLibDir;
  /// Further libraries to link, as -L/-l/-rpath triples: {dir, name}.
  std::vector<std::pair<std::string, std::string>> extraLibs;
  /// Libraries to link without an rpath (libcuda's stub: the real driver
  /// is the system's), as -L/-l pairs: {dir, name}.
  std::vector<std::pair<std::string, std::string>> linkOnlyLibs;
  /// Keep the intermediate files (each part's optimised `<stem>.<k>.ll`
  /// and `<stem>.<k>.o`) next to the shared object.
  bool keepTemps = false;
  /// Threads that optimise and generate the parts (0: the cores
  /// available). The parts do not depend on it: the shared object's code is
  /// the same at every thread count.
  unsigned threads = 0;
  /// The LLVM pipeline (docs/RationaleCPUKernels.md, "Compile time"): the
  /// optimisation level (0-3) and whether loops are unrolled. Measured: O3
  /// with the vectorisers (their interleaving) and no unrolling runs the
  /// GPT step as fast as with it, and compiles 2-3x faster.
  unsigned optLevel = 3;
  bool unrollLoops = false;
};

/// Parts the LLVM module is split into for parallel optimisation and code
/// generation: at most this many, fixed so that the output does not depend
/// on the thread count.
constexpr unsigned kMaxCodegenParts = 16;

/// Translates, optimises, emits and links `module` (LLVM dialect) into
/// `path` (a .so). On failure returns failure with a message in `error`.
LogicalResult buildSharedObject(ModuleOp module, StringRef path,
                                const SharedObjectOptions &options,
                                std::string &error);

/// Registers the LLVM IR translations buildSharedObject needs.
void registerSharedObjectTranslations(DialectRegistry &registry);

} // namespace mlir::par

#endif // PAR_TARGET_CPU_SHAREDOBJECT_H

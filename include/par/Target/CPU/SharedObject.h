//===- SharedObject.h - LLVM dialect to a loadable shared object -*- C++ -*-===//
//
// The last steps of the CPU target, in process: translate a module in the
// LLVM dialect to LLVM IR, optimise it (the O3 pipeline, vectorisers on,
// for the host CPU), emit an object file with the host's TargetMachine,
// and link it into a shared object against the par runtime with the system
// C++ driver ($CXX or c++).
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
  /// Keep the intermediate files (`<stem>.ll`, `<stem>.o`) next to the
  /// shared object.
  bool keepTemps = false;
};

/// Translates, optimises, emits and links `module` (LLVM dialect) into
/// `path` (a .so). On failure returns failure with a message in `error`.
LogicalResult buildSharedObject(ModuleOp module, StringRef path,
                                const SharedObjectOptions &options,
                                std::string &error);

/// Registers the LLVM IR translations buildSharedObject needs.
void registerSharedObjectTranslations(DialectRegistry &registry);

} // namespace mlir::par

#endif // PAR_TARGET_CPU_SHAREDOBJECT_H

//===- Artifact.h - A model in, a runnable artifact out ---------*- C++ -*-===//
//
// What par-compile does, as a library: run the pipeline's front half once
// (split, train, schedule), then its back half twice — the SPMD program and
// the unsharded reference — and build each into a shared object with its
// manifest:
//
//   OUT/sharded.mlir    the SPMD program (after the spmd phase)
//   OUT/sharded.json    its manifest
//   OUT/sharded.so      the compiled SPMD program (par_packed_<name>)
//   OUT/reference.json  the unsharded program's manifest (one device)
//   OUT/reference.so    the unsharded program (par-run --verify)
//
//===----------------------------------------------------------------------===//

#ifndef PAR_PIPELINES_ARTIFACT_H
#define PAR_PIPELINES_ARTIFACT_H

#include "par/Pipelines/Pipelines.h"
#include "par/Target/CPU/SharedObject.h"

#include "mlir/IR/BuiltinOps.h"

namespace mlir::par {

struct ArtifactOptions {
  std::string outputDir;
  bool reference = true; // also build reference.{json,so}
  /// Linking and temporaries (keepTemps also writes <stem>.llvm.mlir).
  SharedObjectOptions link;
};

/// The files buildArtifact writes into the output directory.
std::vector<std::string> artifactFiles(bool reference);

/// Builds the artifact of `model` (modified in place by the front half)
/// with the pipeline's front half and, per program, its back half
/// (Pipelines.h). `target` is what checkCompileOptions returned for
/// `options`, with the cuda toolkit where the caller found it: a cuda
/// target lowers the sharded program for the chip and links it against
/// libpar_runtime_gpu.so (in link.runtimeLibDir) and libcuda's stub; the
/// reference stays a CPU program (par-run --verify runs it on the host).
/// Diagnostics go to the context's handler; `error` says which step failed.
LogicalResult buildArtifact(ModuleOp model, const CompileOptions &options,
                            const TargetSpec &target,
                            const ArtifactOptions &artifact,
                            std::string &error);

} // namespace mlir::par

#endif // PAR_PIPELINES_ARTIFACT_H

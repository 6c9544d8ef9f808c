//===- InitAll.h - Everything par registers ---------------------*- C++ -*-===//
//
// What a tool over par's compiler (par-opt, par-compile) registers: par's
// dialect with its external models (sharding rules and adjoints on
// upstream ops, bufferization of par's ops), every library's passes and the
// pipelines.
// Header-only, like upstream's InitAllPasses.h.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_INITALL_H
#define PAR_INITALL_H

#include "par/Codegen/CPU/Passes.h"
#include "par/Codegen/GPU/Passes.h"
#include "par/Communication/Passes.h"
#include "par/Conversion/ParToRuntime/Passes.h"
#include "par/Dialect/Par/Extensions/ShardingRuleModels.h"
#include "par/Dialect/Par/IR/ParDialect.h"
#include "par/Dialect/Par/Transforms/BufferizableOpInterfaceImpl.h"
#include "par/Dialect/Par/Transforms/Passes.h"
#include "par/Frontend/Passes.h"
#include "par/Pipelines/Pipelines.h"
#include "par/Pipelining/Passes.h"
#include "par/Target/CPU/SharedObject.h"
#include "par/Target/Manifest/Passes.h"
#include "par/Training/AdjointModels.h"
#include "par/Training/Passes.h"

namespace mlir::par {

/// par's dialect and the external models it attaches to upstream ops.
inline void registerAllParDialects(DialectRegistry &registry) {
  registry.insert<ParDialect>();
  registerShardingRuleModels(registry);
  registerBufferizableOpInterfaceExternalModels(registry);
  registerAdjointModels(registry);
  // Translations to LLVM IR, the cuda target's serialization included.
  registerSharedObjectTranslations(registry);
}

/// Every par pass and pipeline.
inline void registerAllParPasses() {
  registerParFrontendPasses();
  registerParFrontendPipelines();
  registerParTransformsPasses();
  registerParCommunicationPasses();
  registerParTrainingPasses();
  registerParPipeliningPasses();
  registerParToRuntimePasses();
  registerParCodegenCPUPasses();
  registerParCodegenGPUPasses();
  registerParTargetManifestPasses();
  registerParPipelines();
}

} // namespace mlir::par

#endif // PAR_INITALL_H

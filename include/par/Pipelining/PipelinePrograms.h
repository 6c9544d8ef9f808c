//===- PipelinePrograms.h - The pipeline programs in the IR -----*- C++ -*-===//
//
// par-pipeline-schedule stores each pipeline rank's ordered actions in the
// module's `par.pipeline` dictionary (`p`, `m`, `v`, `schedule`, `programs`:
// one string per rank, in lib/Schedule's action syntax). These helpers move
// them between that dictionary and lib/Schedule's data structures.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_PIPELINING_PIPELINEPROGRAMS_H
#define PAR_PIPELINING_PIPELINEPROGRAMS_H

#include "mlir/IR/BuiltinOps.h"
#include "par/Schedule/Schedule.h"

namespace mlir::par {

/// Reads the programs stored in `module`'s `par.pipeline`; emits an error on
/// the module and fails if there are none or they do not parse.
LogicalResult loadPipelinePrograms(ModuleOp module,
                                   ::par::pipeline::PipelineShape &shape,
                                   ::par::pipeline::Programs &programs);

/// The error messages of verifying the stored programs (empty when they
/// are complete and deadlock-free under blocking send/recv).
std::vector<std::string>
verifyPipelinePrograms(const ::par::pipeline::PipelineShape &shape,
                       const ::par::pipeline::Programs &programs);

} // namespace mlir::par

#endif // PAR_PIPELINING_PIPELINEPROGRAMS_H

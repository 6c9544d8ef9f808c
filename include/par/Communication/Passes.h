//===- Passes.h - Communication passes --------------------------*- C++ -*-===//
//
// The passes of lib/Communication (declared in Passes.td next to this
// header): before partitioning, Megatron's sequence parallelism
// (par-sequence-parallel); on the partitioned program, reductions sunk
// past linear ops (par-sink-reductions), the data-parallel gradient
// reductions in 16 bits (par-gradient-reduce-precision) or compressed
// (par-compress-gradients), all-reduces in buckets (par-bucket-reductions),
// after bufferization started and waited for around compute
// (par-async-collectives), and the bytes each collective sends
// (par-comm-report).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_COMMUNICATION_PASSES_H
#define PAR_COMMUNICATION_PASSES_H

#include "par/Dialect/Par/IR/ParDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::par {

#define GEN_PASS_DECL
#include "par/Communication/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "par/Communication/Passes.h.inc"

} // namespace mlir::par

#endif // PAR_COMMUNICATION_PASSES_H

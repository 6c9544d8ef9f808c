//===- Buffers.h - Tracing buffers to their allocations ---------*- C++ -*-===//
//
// Helpers shared by the passes that reason about a bufferized function's
// buffers (par-split-deallocs, par-dealloc-after-last-use,
// par-memory-plan).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_CODEGEN_CPU_BUFFERS_H
#define PAR_CODEGEN_CPU_BUFFERS_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

namespace mlir::par {

/// Where tracing `v` back through view-like ops (and the base buffer of
/// extract_strided_metadata) ends: an allocation's result, a block
/// argument, or another op's result.
Value traceView(Value v);

/// The memref.alloc/alloca `v` views, or null.
Operation *allocationOf(Value v);

/// Whether a value of type `t` may refer to a buffer (a memref, or any type
/// that is not a plain scalar or vector, such as a handle): an op result of
/// such a type may alias the buffers the op reads.
bool mayReferToBuffer(Type t);

/// The bytes of a statically shaped memref type (elements times their
/// storage size, rounded up to bytes); -1 if it is not one.
int64_t staticBytes(Type t);

} // namespace mlir::par

#endif // PAR_CODEGEN_CPU_BUFFERS_H

//===- InFlight.h - The buffers of a started collective ---------*- C++ -*-===//
//
// What may happen between a started collective (par.buffer_all_reduce_start,
// par.buffer_all_gather_start) and its par.buffer_wait: its inputs may be
// read but not written, its outputs neither read nor written. Shared by the
// passes that place starts and waits (par-async-collectives places the
// wait as late as this allows, par-zero-prefetch the start as early).
//
// Aliasing is decided on roots: a memref is traced through view-like ops
// (subview, cast, reshapes, ...) to the value they view. A root is a fresh
// allocation (memref.alloc/alloca: aliases only itself), an argument of the
// function (may alias any other argument) or unknown (a loop's iter_arg, a
// call's result, a global: may alias anything).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_COMMUNICATION_INFLIGHT_H
#define PAR_COMMUNICATION_INFLIGHT_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

namespace mlir::par {

/// Where a buffer comes from, for aliasing.
struct BufferRoot {
  enum class Kind { Allocation, Argument, Unknown };
  Value value;
  Kind kind;
};

/// The root of `buffer`, through view-like ops.
BufferRoot getBufferRoot(Value buffer);

/// Whether two roots may be the same memory.
bool mayAlias(const BufferRoot &a, const BufferRoot &b);

/// The buffers of one in-flight collective.
struct InFlight {
  SmallVector<BufferRoot> inputs, outputs;

  InFlight(ValueRange ins, ValueRange outs);

  /// Whether `op` (with the ops nested in its regions) may not run while
  /// the collective is in flight: it may write an input or read or write an
  /// output (or an alias), has unknown memory effects (calls, ops without
  /// MemoryEffectOpInterface or RecursiveMemoryEffects) or an effect other
  /// than a read on memory without a value, or is a terminator (the buffers
  /// escape).
  bool conflicts(Operation *op) const;
};

} // namespace mlir::par

#endif // PAR_COMMUNICATION_INFLIGHT_H

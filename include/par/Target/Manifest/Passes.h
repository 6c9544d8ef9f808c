//===- Passes.h - Target/Manifest passes ------------------------*- C++ -*-===//
//
// The artifact manifest: the passes of lib/Target/Manifest (declared in Passes.td next to this header).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TARGET_MANIFEST_PASSES_H
#define PAR_TARGET_MANIFEST_PASSES_H

#include "par/Dialect/Par/IR/ParDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::par {

#define GEN_PASS_DECL
#include "par/Target/Manifest/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "par/Target/Manifest/Passes.h.inc"

} // namespace mlir::par

#endif // PAR_TARGET_MANIFEST_PASSES_H

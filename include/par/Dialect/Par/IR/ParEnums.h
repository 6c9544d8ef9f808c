//===- ParEnums.h - par enums -----------------------------------*- C++ -*-===//

#ifndef PAR_DIALECT_PAR_IR_PARENUMS_H
#define PAR_DIALECT_PAR_IR_PARENUMS_H

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringRef.h"
#include <optional>

#include "par/Dialect/Par/IR/ParEnums.h.inc"

#endif // PAR_DIALECT_PAR_IR_PARENUMS_H

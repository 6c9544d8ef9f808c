//===- KernelKey.h - The structural key of a kernel function ----*- C++ -*-===//
//
// Two kernel functions (func.func on the CPU, gpu.func on cuda) compute the
// same thing when their printed forms agree with the name left out: the
// same ops in the same order, attributes, shapes and element types. The
// printed form is the key (compared whole, not only its hash), so two
// kernels share a key exactly when they are interchangeable.
// par-outline-kernels and par-gpu-merge-kernel-modules deduplicate by it.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_CODEGEN_KERNELKEY_H
#define PAR_CODEGEN_KERNELKEY_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mlir::par {

/// The key of the symbol-defining kernel function `fn`: its printed form
/// (no locations) under a fixed name.
inline std::string kernelKey(Operation *fn) {
  StringAttr name = SymbolTable::getSymbolName(fn);
  SymbolTable::setSymbolName(fn, "kernel");
  std::string key;
  llvm::raw_string_ostream os(key);
  fn->print(os, OpPrintingFlags().useLocalScope());
  SymbolTable::setSymbolName(fn, name);
  return key;
}

} // namespace mlir::par

#endif // PAR_CODEGEN_KERNELKEY_H

//===- ShardingRuleOpInterface.cpp - Per-op sharding rules ----------------===//
//
// The interface's generated definitions and ShardingRule's printer.
//
//===----------------------------------------------------------------------===//

#include "par/Dialect/Par/Interfaces/ShardingRuleOpInterface.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::par;

#include "par/Dialect/Par/Interfaces/ShardingRuleOpInterface.cpp.inc"

//===----------------------------------------------------------------------===//
// ShardingRule printing
//===----------------------------------------------------------------------===//

std::string ShardingRule::str() const {
  std::string s;
  llvm::raw_string_ostream os(s);
  auto name = [&](int64_t f) -> std::string {
    if (f == kNoFactor)
      return "_";
    std::string n(1, char('i' + (f % 18)));
    if (f >= 18)
      n += std::to_string(f / 18);
    return n;
  };
  auto printList = [&](ArrayRef<SmallVector<int64_t>> lists,
                       ArrayRef<bool> isTensor) {
    os << "(";
    bool first = true;
    for (auto [dims, t] : llvm::zip(lists, isTensor)) {
      if (!first)
        os << ", ";
      first = false;
      if (!t) {
        os << "scalar";
        continue;
      }
      os << "[";
      llvm::interleaveComma(dims, os, [&](int64_t f) { os << name(f); });
      os << "]";
    }
    os << ")";
  };
  printList(operandDims, operandIsTensor);
  os << " -> ";
  printList(resultDims, resultIsTensor);
  os << " {";
  for (int64_t f = 0; f < getNumFactors(); ++f) {
    if (f)
      os << ", ";
    os << name(f) << "=";
    if (factorSizes[f] < 0)
      os << "?";
    else
      os << factorSizes[f];
    if (factorKinds[f] == FactorKind::Reduction)
      os << " reduction";
    else if (factorKinds[f] == FactorKind::Blocked)
      os << " blocked";
  }
  os << "}";
  if (llvm::is_contained(factorKinds, FactorKind::Reduction))
    os << " combine " << stringifyReductionKind(reductionKind);
  return s;
}


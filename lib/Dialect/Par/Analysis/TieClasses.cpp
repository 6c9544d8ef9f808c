//===- TieClasses.cpp - Values forced to share a sharding -----------------===//
//
// See TieClasses.h.
//
//===----------------------------------------------------------------------===//

#include "par/Dialect/Par/Analysis/TieClasses.h"

#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::par;

//===----------------------------------------------------------------------===//
// Tie classes
//===----------------------------------------------------------------------===//

void TieClasses::tie(Value a, Value b) {
  if (!isa<RankedTensorType>(a.getType()) ||
      !isa<RankedTensorType>(b.getType()))
    return;
  classes.unionSets(a, b);
}

TieClasses::TieClasses(ModuleOp module) {
  module.walk([&](Operation *op) {
    if (auto branch = dyn_cast<RegionBranchOpInterface>(op)) {
      SmallVector<RegionSuccessor> succs;
      branch.getSuccessorRegions(RegionBranchPoint::parent(), succs);
      for (RegionSuccessor &s : succs) {
        OperandRange operands = branch.getEntrySuccessorOperands(s);
        ValueRange inputs = s.getSuccessorInputs();
        for (auto [a, b] : llvm::zip(operands, inputs))
          tie(a, b);
      }
    }
    // ReturnLike ops (func.return, linalg.yield) are terminators too; only
    // those inside region-branch ops forward values.
    auto term = dyn_cast<RegionBranchTerminatorOpInterface>(op);
    if (term && isa_and_nonnull<RegionBranchOpInterface>(op->getParentOp())) {
      SmallVector<Attribute> noConstants(op->getNumOperands());
      SmallVector<RegionSuccessor> succs;
      term.getSuccessorRegions(noConstants, succs);
      for (RegionSuccessor &s : succs)
        for (auto [a, b] :
             llvm::zip(term.getSuccessorOperands(s), s.getSuccessorInputs()))
          tie(a, b);
    }
    if (auto br = dyn_cast<BranchOpInterface>(op)) {
      for (unsigned i = 0; i < op->getNumSuccessors(); ++i) {
        SuccessorOperands so = br.getSuccessorOperands(i);
        Block *succ = op->getSuccessor(i);
        unsigned produced = so.getProducedOperandCount();
        for (auto [j, v] : llvm::enumerate(so.getForwardedOperands()))
          if (produced + j < succ->getNumArguments())
            tie(v, succ->getArgument(produced + j));
      }
    }
    if (auto call = dyn_cast<CallOpInterface>(op)) {
      auto callee =
          dyn_cast_or_null<FunctionOpInterface>(call.resolveCallable());
      if (callee && !callee.isExternal()) {
        Block &entry = callee.getFunctionBody().front();
        for (auto [a, b] :
             llvm::zip(call.getArgOperands(), entry.getArguments()))
          tie(a, b);
        callee.getFunctionBody().walk([&](Operation *ret) {
          if (ret->getParentOp() != callee.getOperation() ||
              !ret->hasTrait<OpTrait::ReturnLike>())
            return;
          for (auto [a, b] : llvm::zip(op->getResults(), ret->getOperands()))
            tie(a, b);
        });
      }
    }
  });
}

Value TieClasses::leader(Value v) const {
  auto it = classes.findLeader(v);
  if (it == classes.member_end())
    return v;
  return *it;
}

SmallVector<Value> TieClasses::members(Value leaderValue) const {
  auto it = classes.findLeader(leaderValue);
  if (it == classes.member_end())
    return {leaderValue};
  return SmallVector<Value>(it, classes.member_end());
}

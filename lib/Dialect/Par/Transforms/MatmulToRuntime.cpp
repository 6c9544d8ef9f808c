//===- MatmulToRuntime.cpp - par-matmul-to-runtime ------------------------===//
//
// The BLAS path: buffer-level f32/f64 matmuls call the runtime, which hands
// them to OpenBLAS (CPU) or cuBLAS (CUDA). Everything else about the op is
// already known statically, so the call takes only scalars.
//
//===----------------------------------------------------------------------===//

#include "par/Dialect/Par/Transforms/Passes.h"
#include "par/Dialect/Par/Transforms/RuntimeABI.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#define DEBUG_TYPE "par-matmul-to-runtime"

namespace mlir::par {
#define GEN_PASS_DEF_MATMULTORUNTIME
#include "par/Dialect/Par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

bool isContiguousStatic(Value v) {
  auto t = dyn_cast<MemRefType>(v.getType());
  return t && t.hasStaticShape() && t.getLayout().isIdentity() &&
         t.getRank() == 2;
}

struct MatmulToRuntimePass
    : public mlir::par::impl::MatmulToRuntimeBase<MatmulToRuntimePass> {
  void runOnOperation() override {
    SmallVector<linalg::MatmulOp> matmuls;
    getOperation().walk([&](linalg::MatmulOp op) {
      if (!op.hasPureBufferSemantics() || op.hasUserDefinedMaps())
        return;
      if (!llvm::all_of(op->getOperands(), isContiguousStatic))
        return;
      Type elt = cast<MemRefType>(op->getOperand(0).getType()).getElementType();
      if (!elt.isF32() && !elt.isF64())
        return;
      if (!llvm::all_of(op->getOperands(), [&](Value v) {
            return cast<MemRefType>(v.getType()).getElementType() == elt;
          }))
        return;
      matmuls.push_back(op);
    });
    for (linalg::MatmulOp op : matmuls) {
      OpBuilder b(op);
      Location loc = op.getLoc();
      Value a = op.getInputs()[0], bm = op.getInputs()[1],
            c = op.getOutputs()[0];
      auto at = cast<MemRefType>(a.getType());
      auto ct = cast<MemRefType>(c.getType());
      int64_t M = ct.getDimSize(0), N = ct.getDimSize(1), K = at.getDimSize(1);
      auto i64 = [&](int64_t v) {
        return arith::ConstantIntOp::create(b, loc, v, 64).getResult();
      };
      auto i32 = [&](int64_t v) {
        return arith::ConstantIntOp::create(b, loc, v, 32).getResult();
      };
      emitRuntimeCall(b, loc, op, "par_rt_k_matmul",
                      {emitBufferAddress(b, loc, a),
                       emitBufferAddress(b, loc, bm),
                       emitBufferAddress(b, loc, c), i64(M), i64(N), i64(K),
                       i32(*getRuntimeDType(at.getElementType())),
                       i32(/*accumulate=*/1)});
      op.erase();
    }
  }
};
} // namespace

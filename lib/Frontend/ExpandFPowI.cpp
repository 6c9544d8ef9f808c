//===- ExpandFPowI.cpp - par-expand-fpowi ---------------------------------===//
//
// math.fpowi with a constant exponent as square-and-multiply (see
// Passes.td). par-autodiff has tangent rules for mulf and divf, not for
// fpowi; the expansion is exact for the small exponents torch emits (2, 3).
//
//===----------------------------------------------------------------------===//

#include "par/Frontend/Passes.h"
#include "StageListener.h"

#include "mlir/IR/Matchers.h"

#define DEBUG_TYPE "par-expand-fpowi"

namespace mlir::par {
#define GEN_PASS_DEF_EXPANDFPOWI
#include "par/Frontend/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

/// x^n = x^(n/2) * x^(n/2) (* x when n is odd); x^0 = 1; x^-n = 1 / x^n.
struct ExpandConstantFPowI : public OpRewritePattern<math::FPowIOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(math::FPowIOp op,
                                PatternRewriter &rewriter) const override {
    APInt exp;
    if (!matchPattern(op.getRhs(), m_ConstantInt(&exp)))
      return rewriter.notifyMatchFailure(op, "exponent is not a constant");
    Location loc = op.getLoc();
    Type type = op.getType();
    auto one = [&]() -> Value {
      return arith::ConstantOp::create(rewriter, loc, type,
                                       rewriter.getOneAttr(type));
    };
    int64_t n = exp.getSExtValue();
    uint64_t m = n < 0 ? -static_cast<uint64_t>(n) : n;
    Value result;
    Value power = op.getLhs(); // x^(2^k)
    for (; m; m >>= 1) {
      if (m & 1)
        result = result ? arith::MulFOp::create(rewriter, loc, result, power)
                              .getResult()
                        : power;
      if (m > 1)
        power = arith::MulFOp::create(rewriter, loc, power, power);
    }
    if (!result)
      result = one();
    else if (n < 0)
      result = arith::DivFOp::create(rewriter, loc, one(), result);
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct ExpandFPowIPass
    : public mlir::par::impl::ExpandFPowIBase<ExpandFPowIPass> {
  void runOnOperation() override {
    // Collect, then report every op that cannot be expanded before changing
    // anything.
    bool bad = false;
    getOperation().walk([&](math::FPowIOp op) {
      APInt exp;
      if (matchPattern(op.getRhs(), m_ConstantInt(&exp)))
        return;
      op.emitOpError("has an exponent that is not a constant; par can only "
                     "expand x ** n for a constant integer n into "
                     "multiplications");
      bad = true;
    });
    if (bad)
      return signalPassFailure();
    if (!getOperation()
             .walk([](math::FPowIOp) { return WalkResult::interrupt(); })
             .wasInterrupted())
      return; // Nothing to do: leave the function as it is.
    RewritePatternSet patterns(&getContext());
    patterns.add<ExpandConstantFPowI>(&getContext());
    FrozenRewritePatternSet frozen(std::move(patterns));
    if (failed(applyPatternsKeepingStage(getOperation(), frozen)))
      return signalPassFailure();
  }
};

} // namespace

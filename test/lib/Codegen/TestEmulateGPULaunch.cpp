//===- TestEmulateGPULaunch.cpp - par-test-emulate-gpu-launch -------------===//
//
// Runs par-gpu-map-linalg's kernels on the host, so that their results can
// be compared with the CPU lowering of the same linalg ops without a GPU:
// each 1-D gpu.launch becomes a loop over blocks and, inside, over threads.
// A block-wide gpu.all_reduce (top level of the kernel body, `uniform`, as
// par-gpu-map-linalg writes them) is emulated in two phases: the body's ops
// before the last all_reduce run for every thread and their all_reduce
// operands are combined in thread order; then the whole body runs once
// more for thread 0 with each all_reduce replaced by its combined value.
// That is exact for par's kernels, whose ops before the reductions only
// read memory and whose threads other than 0 write nothing after them.
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/Pass.h"

using namespace mlir;

namespace {

Value combine(OpBuilder &b, Location loc, gpu::AllReduceOperation kind,
              Value x, Value y) {
  using K = gpu::AllReduceOperation;
  bool isFloat = isa<FloatType>(x.getType());
  switch (kind) {
  case K::ADD:
    return isFloat ? arith::AddFOp::create(b, loc, x, y).getResult()
                   : arith::AddIOp::create(b, loc, x, y).getResult();
  case K::MUL:
    return isFloat ? arith::MulFOp::create(b, loc, x, y).getResult()
                   : arith::MulIOp::create(b, loc, x, y).getResult();
  case K::MAXIMUMF: return arith::MaximumFOp::create(b, loc, x, y);
  case K::MINIMUMF: return arith::MinimumFOp::create(b, loc, x, y);
  case K::MAXNUMF: return arith::MaxNumFOp::create(b, loc, x, y);
  case K::MINNUMF: return arith::MinNumFOp::create(b, loc, x, y);
  case K::MAXSI: return arith::MaxSIOp::create(b, loc, x, y);
  case K::MINSI: return arith::MinSIOp::create(b, loc, x, y);
  case K::MAXUI: return arith::MaxUIOp::create(b, loc, x, y);
  case K::MINUI: return arith::MinUIOp::create(b, loc, x, y);
  case K::AND: return arith::AndIOp::create(b, loc, x, y);
  case K::OR: return arith::OrIOp::create(b, loc, x, y);
  case K::XOR: return arith::XOrIOp::create(b, loc, x, y);
  }
  return {};
}

struct TestEmulateGPULaunchPass
    : public PassWrapper<TestEmulateGPULaunchPass, OperationPass<>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestEmulateGPULaunchPass)
  StringRef getArgument() const final { return "par-test-emulate-gpu-launch"; }
  StringRef getDescription() const final {
    return "Runs 1-D gpu.launch kernels as host loops (test only)";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<scf::SCFDialect, arith::ArithDialect>();
  }

  void runOnOperation() override {
    SmallVector<gpu::LaunchOp> launches;
    getOperation()->walk([&](gpu::LaunchOp l) { launches.push_back(l); });
    for (gpu::LaunchOp launch : launches)
      if (failed(emulate(launch)))
        return signalPassFailure();
  }

  LogicalResult emulate(gpu::LaunchOp launch) {
    Location loc = launch.getLoc();
    OpBuilder b(launch);
    Block &body = launch.getBody().front();
    Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
    Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
    Value grid = launch.getGridSizeX(), threads = launch.getBlockSizeX();
    SmallVector<gpu::AllReduceOp> reduces;
    for (Operation &op : body)
      if (auto r = dyn_cast<gpu::AllReduceOp>(op)) {
        if (!r.getOp() || !r.getBody().empty())
          return r.emitError("emulation: only kind-based all_reduce");
        reduces.push_back(r);
      }
    auto blocks = scf::ForOp::create(b, loc, c0, grid, c1);
    b.setInsertionPointToStart(blocks.getBody());
    Value bx = blocks.getInductionVar();
    // Maps the launch's ids and sizes; y and z are 0 of 1.
    auto mapIds = [&](IRMapping &map, Value tx) {
      gpu::KernelDim3 bid = launch.getBlockIds(), tid = launch.getThreadIds();
      gpu::KernelDim3 gs = launch.getGridSize(), bs = launch.getBlockSize();
      map.map(bid.x, bx);
      map.map(bid.y, c0);
      map.map(bid.z, c0);
      map.map(tid.x, tx);
      map.map(tid.y, c0);
      map.map(tid.z, c0);
      map.map(gs.x, grid);
      map.map(gs.y, c1);
      map.map(gs.z, c1);
      map.map(bs.x, threads);
      map.map(bs.y, c1);
      map.map(bs.z, c1);
    };
    auto cloneUntil = [&](OpBuilder &ob, IRMapping &map, Operation *stop) {
      for (Operation &op : body) {
        if (&op == stop || isa<gpu::TerminatorOp>(op))
          break;
        if (auto r = dyn_cast<gpu::AllReduceOp>(op)) {
          map.map(r.getResult(), map.lookupOrDefault(r.getValue()));
          continue;
        }
        ob.clone(op, map);
      }
    };
    if (reduces.empty()) {
      auto loop = scf::ForOp::create(b, loc, c0, threads, c1);
      OpBuilder lb = OpBuilder::atBlockBegin(loop.getBody());
      IRMapping map;
      mapIds(map, loop.getInductionVar());
      cloneUntil(lb, map, nullptr);
      launch.erase();
      return success();
    }
    // Phase 1: thread 0's operands, then threads 1.. folded in order.
    SmallVector<Value> first;
    {
      IRMapping map;
      mapIds(map, c0);
      cloneUntil(b, map, reduces.back());
      for (gpu::AllReduceOp r : reduces)
        first.push_back(map.lookupOrDefault(r.getValue()));
    }
    auto loop = scf::ForOp::create(b, loc, c1, threads, c1, first);
    {
      OpBuilder lb = OpBuilder::atBlockBegin(loop.getBody());
      IRMapping map;
      mapIds(map, loop.getInductionVar());
      cloneUntil(lb, map, reduces.back());
      SmallVector<Value> next;
      for (auto [k, r] : llvm::enumerate(reduces))
        next.push_back(combine(lb, loc, *r.getOp(),
                               loop.getRegionIterArgs()[k],
                               map.lookupOrDefault(r.getValue())));
      scf::YieldOp::create(lb, loc, next);
    }
    // Phase 2: the body for thread 0 with the combined values.
    IRMapping map;
    mapIds(map, c0);
    for (Operation &op : body) {
      if (isa<gpu::TerminatorOp>(op))
        break;
      if (auto r = dyn_cast<gpu::AllReduceOp>(op)) {
        auto it = llvm::find(reduces, r);
        map.map(r.getResult(), loop.getResult(it - reduces.begin()));
        continue;
      }
      b.clone(op, map);
    }
    launch.erase();
    return success();
  }
};

} // namespace

namespace mlir::par::test {
void registerTestEmulateGPULaunchPass() {
  PassRegistration<TestEmulateGPULaunchPass>();
}
std::unique_ptr<Pass> createTestEmulateGPULaunchPass() {
  return std::make_unique<TestEmulateGPULaunchPass>();
}
} // namespace mlir::par::test

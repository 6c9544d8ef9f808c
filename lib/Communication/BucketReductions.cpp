//===- BucketReductions.cpp - par-bucket-reductions -----------------------===//
//
// Gradient buckets (PyTorch DDP) and the all-reduce combiner (XLA) on the
// partitioned program. Each block is scanned once in program order; an open
// bucket per (mesh, axes, kind, element type) collects the all-reduces of
// that key until
//
//   - the next one would take it over the byte cap (a new bucket starts),
//   - an op uses a member's result, directly or inside its regions (the
//     bucket sits at its last member, so every earlier member's users must
//     come after that point: dominance is preserved by construction), or
//   - a par.send/par.recv is reached (point-to-point traffic between
//     pipeline stages keeps its order relative to the reductions).
//
// Before scanning, the pure ops that consume reduction results (directly or
// through other such ops) move down to just before their first user in the
// block: a consumer that is not needed yet does not close a bucket. Mixed
// precision widens each reduced gradient right after its reduction; the
// widening can wait for the return that needs it.
//
// Buckets are decided first and rewritten afterwards (collect, then mutate).
// The members' inputs are defined before them, hence before the last one;
// their results are used only after it: replacing them by the bucket's
// results keeps the program valid. All-reduces are Pure, so moving the
// earlier ones down changes no other op's meaning; every rank runs the same
// program and makes the same buckets, so the collectives stay matched.
//
//===----------------------------------------------------------------------===//

#include "par/Dialect/Par/Analysis/ReshardPlan.h"
#include "par/Communication/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/DenseMap.h"

#include <deque>

#define DEBUG_TYPE "par-bucket-reductions"

namespace mlir::par {
#define GEN_PASS_DEF_BUCKETREDUCTIONS
#include "par/Communication/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

/// What must agree for all-reduces to share one message.
using BucketKey = std::tuple<Attribute, Attribute, Attribute, Type>;

struct Bucket {
  SmallVector<AllReduceOp> members;
  double bytes = 0;
  bool closed = false;
};

/// The buckets of one block, in program order.
class BlockBuckets {
public:
  explicit BlockBuckets(double cap) : cap(cap) {}

  void scan(Block &block) {
    for (Operation &op : block) {
      // A use of a member closes its bucket, before `op` may join one (an
      // all-reduce of a member's result must not join that member's
      // bucket).
      op.walk([&](Operation *inner) {
        for (Value v : inner->getOperands())
          if (auto it = memberOf.find(v); it != memberOf.end())
            close(it->second);
      });
      if (isa<SendOp, RecvOp>(op)) {
        closeAll();
        continue;
      }
      if (auto ar = dyn_cast<AllReduceOp>(op))
        add(ar);
    }
  }

  /// Buckets of two or more members (the others stay plain all-reduces).
  SmallVector<Bucket *> result() {
    SmallVector<Bucket *> out;
    for (Bucket &b : buckets)
      if (b.members.size() > 1)
        out.push_back(&b);
    return out;
  }

private:
  double cap;
  std::deque<Bucket> buckets; // stable addresses
  DenseMap<BucketKey, Bucket *> open;
  DenseMap<Value, Bucket *> memberOf; // results of open buckets' members

  void add(AllReduceOp ar) {
    auto type = cast<RankedTensorType>(ar.getInput().getType());
    if (!type.hasStaticShape())
      return;
    double bytes = tensorBytes(type);
    BucketKey key{ar.getMeshAttr(), ar.getAxes(), ar.getKindAttr(),
                  type.getElementType()};
    auto it = open.find(key);
    if (it != open.end() && it->second->bytes + bytes <= cap) {
      join(*it->second, ar, bytes);
      return;
    }
    if (it != open.end())
      close(it->second);
    if (bytes > cap)
      return; // alone over the cap: stays a plain all_reduce
    Bucket &b = buckets.emplace_back();
    open[key] = &b;
    join(b, ar, bytes);
  }

  void join(Bucket &b, AllReduceOp ar, double bytes) {
    b.members.push_back(ar);
    b.bytes += bytes;
    memberOf[ar.getResult()] = &b;
  }

  void close(Bucket *b) {
    if (b->closed)
      return;
    b->closed = true;
    for (AllReduceOp m : b->members)
      memberOf.erase(m.getResult());
    AllReduceOp first = b->members.front();
    open.erase(BucketKey{first.getMeshAttr(), first.getAxes(),
                         first.getKindAttr(),
                         first.getInput().getType().getElementType()});
  }

  void closeAll() {
    for (Bucket &b : buckets)
      close(&b);
  }
};

/// Whether `op` may move within its block: no side effects (linalg on
/// tensors included), not a terminator, not a collective.
bool isMovable(Operation *op) {
  return !op->hasTrait<OpTrait::IsTerminator>() &&
         !isa<ParDialect>(op->getDialect()) && isMemoryEffectFree(op);
}

/// Moves the pure consumers of all-reduce results in `block` down to just
/// before their first user (see the file comment).
void sinkConsumers(Block &block) {
  DenseSet<Operation *> downstream;
  SmallVector<Operation *> order;
  for (Operation &op : block) {
    bool fromReduction = llvm::any_of(op.getOperands(), [&](Value v) {
      Operation *def = v.getDefiningOp();
      return def && def->getBlock() == &block &&
             (isa<AllReduceOp>(def) || downstream.contains(def));
    });
    if (fromReduction && isMovable(&op)) {
      downstream.insert(&op);
      order.push_back(&op);
    }
  }
  // Last first: an op's users have reached their places when it moves.
  for (Operation *op : llvm::reverse(order)) {
    Operation *first = nullptr;
    bool local = true;
    for (Operation *user : op->getUsers()) {
      Operation *u = block.findAncestorOpInBlock(*user);
      local &= u != nullptr;
      if (u && (!first || u->isBeforeInBlock(first)))
        first = u;
    }
    if (local && first && first != op->getNextNode())
      op->moveBefore(first);
  }
}

struct BucketReductionsPass
    : public mlir::par::impl::BucketReductionsBase<BucketReductionsPass> {
  using BucketReductionsBase::BucketReductionsBase;

  void runOnOperation() override {
    if (bucketBytes < 0) {
      getOperation().emitError() << "par-bucket-reductions: bucket-bytes must "
                                    "be non-negative, got "
                                 << int64_t(bucketBytes);
      return signalPassFailure();
    }
    if (bucketBytes == 0)
      return markAllAnalysesPreserved();
    SmallVector<Block *> blocks;
    getOperation().walk([&](FunctionOpInterface fn) {
      fn->walk([&](Block *b) { blocks.push_back(b); });
    });
    for (Block *block : blocks) {
      sinkConsumers(*block);
      BlockBuckets buckets{double(bucketBytes)};
      buckets.scan(*block);
      for (Bucket *b : buckets.result())
        rewrite(*b);
    }
  }

  /// One par.bucket_all_reduce at the last member, replacing every member.
  void rewrite(Bucket &b) {
    AllReduceOp last = b.members.back();
    SmallVector<Value> inputs;
    SmallVector<Location> locs;
    for (AllReduceOp m : b.members) {
      inputs.push_back(m.getInput());
      locs.push_back(m.getLoc());
    }
    OpBuilder builder(last);
    auto bucket = BucketAllReduceOp::create(
        builder, FusedLoc::get(&getContext(), locs), ValueRange(inputs).getTypes(),
        inputs, last.getMeshAttr(), last.getAxes(), last.getKindAttr());
    for (auto [m, r] : llvm::zip(b.members, bucket.getResults())) {
      m.getResult().replaceAllUsesWith(r);
      m.erase();
    }
    ++numBuckets;
    numBucketed += b.members.size();
  }
};

} // namespace

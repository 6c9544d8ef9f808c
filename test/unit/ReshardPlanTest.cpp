//===- ReshardPlanTest.cpp - The reshard planner and its costs ------------===//
//
// Dialect/Par/Analysis/ReshardPlan: which collectives turn one sharding into
// another, and their bytes per device against the ring formulas of
// docs/Formulas.md (all-reduce 2(n-1)/n S; all-gather, reduce-scatter and
// all-to-all (n-1)/n S, S the full tensor).
//
//===----------------------------------------------------------------------===//

#include "par/Dialect/Par/Analysis/ReshardPlan.h"
#include "par/Dialect/Par/IR/ParDialect.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::par;
using Kind = ReshardStep::Kind;

namespace {

class ReshardPlanTest : public ::testing::Test {
protected:
  ReshardPlanTest() {
    context.loadDialect<ParDialect>();
    module = parseSourceString<ModuleOp>(
        "par.mesh @mesh [\"dp\"=2, \"tp\"=4]", &context);
    mesh = *module->getOps<MeshOp>().begin();
    type = RankedTensorType::get({8, 16}, Float32Type::get(&context));
  }

  ShardingAttr sharding(StringRef text) {
    return cast<ShardingAttr>(parseAttribute(text, &context));
  }

  SmallVector<Kind> kinds(ArrayRef<ReshardStep> steps) {
    SmallVector<Kind> k;
    for (const ReshardStep &s : steps)
      k.push_back(s.kind);
    return k;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  MeshOp mesh;
  RankedTensorType type;
  static constexpr double S = 8 * 16 * 4; // bytes of the full tensor
};

TEST_F(ReshardPlanTest, PartialToReplicatedIsOneAllReduce) {
  ShardingAttr from = sharding("#par.sharding<@mesh, [{}, {}], partial sum "
                               "{\"tp\"}>");
  SmallVector<ReshardStep> steps = planReshard(from, nullptr, 2);
  EXPECT_EQ(kinds(steps), SmallVector<Kind>{Kind::AllReduce});
  EXPECT_DOUBLE_EQ(reshardCost(steps, from, type, mesh), 2.0 * 3 / 4 * S);
}

TEST_F(ReshardPlanTest, PartialToSplitIsOneReduceScatter) {
  ShardingAttr from = sharding("#par.sharding<@mesh, [{}, {}], partial sum "
                               "{\"tp\"}>");
  ShardingAttr to = sharding("#par.sharding<@mesh, [{\"tp\"}, {}]>");
  SmallVector<ReshardStep> steps = planReshard(from, to, 2);
  EXPECT_EQ(kinds(steps), SmallVector<Kind>{Kind::ReduceScatter});
  EXPECT_DOUBLE_EQ(reshardCost(steps, from, type, mesh), 3.0 / 4 * S);
}

TEST_F(ReshardPlanTest, SplitToReplicatedIsOneAllGather) {
  ShardingAttr from = sharding("#par.sharding<@mesh, [{\"tp\"}, {}]>");
  SmallVector<ReshardStep> steps = planReshard(from, nullptr, 2);
  EXPECT_EQ(kinds(steps), SmallVector<Kind>{Kind::AllGather});
  EXPECT_EQ(steps[0].dim, 0);
  EXPECT_DOUBLE_EQ(reshardCost(steps, from, type, mesh), 3.0 / 4 * S);
}

TEST_F(ReshardPlanTest, MovingASplitIsOneAllToAll) {
  ShardingAttr from = sharding("#par.sharding<@mesh, [{\"tp\"}, {}]>");
  ShardingAttr to = sharding("#par.sharding<@mesh, [{}, {\"tp\"}]>");
  SmallVector<ReshardStep> steps = planReshard(from, to, 2);
  EXPECT_EQ(kinds(steps), SmallVector<Kind>{Kind::AllToAll});
  EXPECT_DOUBLE_EQ(reshardCost(steps, from, type, mesh), 3.0 / 4 * S / 4);
}

TEST_F(ReshardPlanTest, ReplicatedToSplitIsLocal) {
  ShardingAttr to = sharding("#par.sharding<@mesh, [{\"dp\"}, {\"tp\"}]>");
  SmallVector<ReshardStep> steps = planReshard(nullptr, to, 2);
  ASSERT_FALSE(steps.empty());
  for (const ReshardStep &s : steps)
    EXPECT_EQ(s.kind, Kind::AllSlice);
  EXPECT_DOUBLE_EQ(reshardCost(steps, nullptr, type, mesh), 0.0);
  EXPECT_EQ(steps.back().after, to);
}

TEST_F(ReshardPlanTest, SameShardingNeedsNothing) {
  ShardingAttr s = sharding("#par.sharding<@mesh, [{\"dp\"}, {}]>");
  EXPECT_TRUE(planReshard(s, s, 2).empty());
}

} // namespace

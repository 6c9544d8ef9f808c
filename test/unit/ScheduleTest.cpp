//===- ScheduleTest.cpp - The schedule core against the published figures -===//
//
// lib/Pipelining/Schedule's timetables, programs, verifier and text format, checked
// against the formulas in docs/Formulas.md (GPipe and 1F1B bubble fraction
// (p-1)/(m+p-1); activations in flight on stage 0: m for GPipe, p for 1F1B)
// and against hand-broken programs the verifier must refuse.
//
//===----------------------------------------------------------------------===//

#include "par/Pipelining/Schedule.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace par::pipeline;

namespace {

Timetable timetable(ScheduleKind kind, int p, int m, int v = 1) {
  ScheduleConfig config;
  config.kind = kind;
  config.shape.p = p;
  config.shape.m = m;
  config.shape.v = v;
  // T_F = 1, T_B = 2 (the default costs), no transfer latency.
  Timetable t;
  std::string error;
  EXPECT_TRUE(buildTimetable(config, t, error)) << error;
  return t;
}

TEST(Schedule, GPipeAnd1F1BBubbleFraction) {
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB})
    for (int p : {2, 4})
      for (int m : {4, 8}) {
        Metrics metrics = computeMetrics(timetable(kind, p, m));
        EXPECT_NEAR(metrics.bubbleFraction, double(p - 1) / (m + p - 1),
                    1e-12)
            << getScheduleName(kind) << " p=" << p << " m=" << m;
      }
}

TEST(Schedule, ActivationsInFlightOnStageZero) {
  for (int p : {2, 4})
    for (int m : {4, 8}) {
      EXPECT_EQ(computeMetrics(timetable(ScheduleKind::GPipe, p, m))
                    .peakActivations[0],
                m);
      EXPECT_EQ(computeMetrics(timetable(ScheduleKind::OneFOneB, p, m))
                    .peakActivations[0],
                std::min(p, m));
    }
}

TEST(Schedule, EveryKindDerivesVerifiedPrograms) {
  struct Case {
    ScheduleKind kind;
    int p, m, v;
  } cases[] = {{ScheduleKind::GPipe, 3, 5, 1},
               {ScheduleKind::OneFOneB, 4, 8, 1},
               {ScheduleKind::Interleaved, 2, 4, 2},
               {ScheduleKind::ZBH1, 4, 8, 1}};
  for (const Case &c : cases) {
    Timetable t = timetable(c.kind, c.p, c.m, c.v);
    Programs programs = derivePrograms(t);
    VerifyResult r = verifyPrograms(t.shape, programs, Costs());
    EXPECT_TRUE(r.ok) << getScheduleName(c.kind)
                      << (r.errors.empty() ? "" : ": " + r.errors[0]);
    EXPECT_GT(r.transfers, 0u);
    // The text format round-trips.
    PipelineShape shape;
    Programs parsed;
    std::string error;
    ASSERT_TRUE(parsePrograms(printPrograms(t.shape, programs), "t", shape,
                              parsed, error))
        << error;
    EXPECT_EQ(parsed, programs);
    EXPECT_EQ(shape.splitBackward, t.shape.splitBackward);
  }
}

TEST(Schedule, VerifierRefusesADeadlock) {
  Timetable t = timetable(ScheduleKind::OneFOneB, 2, 2);
  Programs programs = derivePrograms(t);
  // Rank 1 waits for the second activation before receiving the first.
  std::vector<Action> &r1 = programs[1];
  auto first = std::find_if(r1.begin(), r1.end(),
                            [](const Action &a) { return a.isRecv(); });
  ASSERT_NE(first, r1.end());
  auto second = std::find_if(first + 1, r1.end(), [](const Action &a) {
    return a.op == Op::RecvAct;
  });
  ASSERT_NE(second, r1.end());
  std::iter_swap(first, second);
  VerifyResult r = verifyPrograms(t.shape, programs, Costs());
  EXPECT_FALSE(r.ok);
  ASSERT_FALSE(r.errors.empty());
}

TEST(Schedule, VerifierRefusesAMissingCompute) {
  Timetable t = timetable(ScheduleKind::GPipe, 2, 2);
  Programs programs = derivePrograms(t);
  auto &r0 = programs[0];
  r0.erase(std::find_if(r0.begin(), r0.end(),
                        [](const Action &a) { return a.op == Op::B; }));
  EXPECT_FALSE(verifyPrograms(t.shape, programs, Costs()).ok);
}

// par-run's CPU runtime: sends never block, so each receive moves down to
// its reader. ZB-H1 at p=2: rank 0's stored program receives grad(mb) before
// F(mb+1) (the planned arrival); sunk, after it, before BI(mb).
TEST(Schedule, SunkReceivesWaitAtTheirReaders) {
  ScheduleConfig config;
  config.kind = ScheduleKind::ZBH1;
  config.shape.p = 2;
  config.shape.m = 8;
  Timetable t;
  std::string error;
  ASSERT_TRUE(buildTimetable(config, t, error)) << error;
  validateConfig(config); // sets splitBackward
  Programs programs = derivePrograms(t);
  Programs sunk = sinkReceives(programs);
  EXPECT_EQ(computeOnly(sunk), computeOnly(programs));
  VerifyResult r =
      verifyPrograms(config.shape, sunk, Costs(), Transfers::Buffered);
  EXPECT_TRUE(r.ok) << (r.errors.empty() ? "" : r.errors.front());
  // Under rendezvous the sunk programs deadlock (why the stored ones are
  // not sunk).
  EXPECT_FALSE(verifyPrograms(config.shape, sunk, Costs()).ok);
  // How many of rank 0's gradient receives come right before their BI.
  auto atReader = [](const std::vector<Action> &r0) {
    int n = 0;
    for (size_t i = 0; i + 1 < r0.size(); ++i)
      n += r0[i].op == Op::RecvGrad && r0[i + 1].op == Op::BI &&
           r0[i + 1].mb == r0[i].mb;
    return n;
  };
  EXPECT_EQ(atReader(sunk[0]), 8);
  EXPECT_LT(atReader(programs[0]), 8);
}

// A channel delivers in the order sent: receives keep that order when sunk,
// and the buffered verifier refuses one out of it.
TEST(Schedule, SunkReceivesKeepTheirChannelsOrder) {
  PipelineShape shape;
  Programs programs;
  std::string error;
  // Rank 1 runs F(1) before F(0): sinking each receive to its reader alone
  // would receive act(1) first.
  ASSERT_TRUE(parsePrograms(
      "pipeline p=2 m=2\n"
      "rank 0: F(mb=0,s=0) send-act(mb=0,s=1,to=1) F(mb=1,s=0) "
      "send-act(mb=1,s=1,to=1) recv-grad(mb=0,s=1,from=1) B(mb=0,s=0) "
      "recv-grad(mb=1,s=1,from=1) B(mb=1,s=0)\n"
      "rank 1: recv-act(mb=0,s=1,from=0) recv-act(mb=1,s=1,from=0) "
      "F(mb=1,s=1) F(mb=0,s=1) B(mb=0,s=1) send-grad(mb=0,s=1,to=0) "
      "B(mb=1,s=1) send-grad(mb=1,s=1,to=0)\n",
      "t", shape, programs, error))
      << error;
  Programs sunk = sinkReceives(programs);
  EXPECT_TRUE(
      verifyPrograms(shape, sunk, Costs(), Transfers::Buffered).ok);
  const std::vector<Action> &r1 = sunk[1];
  ASSERT_GE(r1.size(), 3u);
  EXPECT_EQ(formatAction(r1[0]), "recv-act(mb=0,s=1,from=0)");
  EXPECT_EQ(formatAction(r1[1]), "recv-act(mb=1,s=1,from=0)");
  // Out of order: refused, naming the channel's order.
  std::swap(programs[1][0], programs[1][1]);
  VerifyResult r =
      verifyPrograms(shape, programs, Costs(), Transfers::Buffered);
  EXPECT_FALSE(r.ok);
  ASSERT_FALSE(r.errors.empty());
  EXPECT_NE(r.errors.front().find("in the order sent"), std::string::npos)
      << r.errors.front();
}

TEST(Schedule, ValidateConfigNamesTheProblem) {
  ScheduleConfig config;
  config.kind = ScheduleKind::Interleaved;
  config.shape.p = 4;
  config.shape.m = 6;
  config.shape.v = 2;
  std::string error = validateConfig(config);
  EXPECT_NE(error.find("divisible"), std::string::npos) << error;
  ScheduleKind kind;
  EXPECT_FALSE(parseScheduleKind("sideways", kind));
  EXPECT_TRUE(parseScheduleKind("zbh1", kind));
  EXPECT_EQ(kind, ScheduleKind::ZBH1);
}

/// The per-stage costs measured on this machine's ZB-V bench (GPT L=4
/// d=128, 4 stages on 2 ranks, ms per action; bench/README.md): stage 0 has
/// no input gradient (BI is a call, BW the whole backward), stage 3 the
/// loss.
std::vector<StageCosts> measuredZBVStages() {
  auto stage = [](double f, double bi, double bw) {
    StageCosts k;
    k.f = f;
    k.bi = bi;
    k.bw = bw;
    k.b = bi + bw;
    return k;
  };
  return {stage(3.3, 0.05, 6.7), stage(3.3, 4.2, 2.3), stage(3.4, 4.3, 2.3),
          stage(3.6, 4.3, 2.4)};
}

TEST(Schedule, StageCostsTimeEachStage) {
  Costs c;
  c.stages = measuredZBVStages();
  EXPECT_EQ(c.of(Op::BW, 0), 6.7);
  EXPECT_EQ(c.of(Op::BI, 3), 4.3);
  EXPECT_EQ(c.of(Op::F, 7), c.f) << "a stage without an entry: uniform";
  EXPECT_EQ(c.of(Op::SendAct, 1), 0);
  ScheduleConfig config;
  config.kind = ScheduleKind::ZBV;
  config.shape.p = 3; // 6 stages, 4 entries
  config.shape.v = 2;
  config.shape.m = 6;
  config.costs = c;
  std::string error = validateConfig(config);
  EXPECT_NE(error.find("one entry per stage: 6 stages, 4 given"),
            std::string::npos)
      << error;
  config.shape.p = 2;
  config.costs.stages[1].bi = 0;
  error = validateConfig(config);
  EXPECT_NE(error.find("stage 1's costs must be positive"), std::string::npos)
      << error;
}

// ZB-V's list schedule on the stages' own costs: its orders, timed on
// those costs, finish sooner than the orders built on unit costs (what
// par-pipeline-schedule built before it estimated stage costs; on the
// bench they ran 1.05x ZB-H1's step), and sooner than ZB-H1 on the same
// model (each of its stages two of ZB-V's).
TEST(Schedule, ZBVOrdersFollowStageCosts) {
  ScheduleConfig config;
  config.kind = ScheduleKind::ZBV;
  config.shape.p = 2;
  config.shape.m = 8;
  config.shape.v = 2;
  config.costs.stages = measuredZBVStages();
  ASSERT_EQ(validateConfig(config), "");
  std::string error;
  Timetable own, unit, h1;
  ASSERT_TRUE(simulateTimetable(
      config.shape, buildComputeOrders(config.kind, config.shape, config.costs),
      config.costs, own, error))
      << error;
  ASSERT_TRUE(simulateTimetable(
      config.shape, buildComputeOrders(config.kind, config.shape, Costs()),
      config.costs, unit, error))
      << error;
  ScheduleConfig zb;
  zb.kind = ScheduleKind::ZBH1;
  zb.shape.p = 2;
  zb.shape.m = 8;
  for (int s = 0; s < 4; s += 2) {
    StageCosts a = config.costs.stages[s], b = config.costs.stages[s + 1];
    a.f += b.f;
    a.bi += b.bi;
    a.bw += b.bw;
    a.b = a.bi + a.bw;
    zb.costs.stages.push_back(a);
  }
  ASSERT_TRUE(buildTimetable(zb, h1, error)) << error;
  EXPECT_LT(own.makespan, unit.makespan * 0.95)
      << own.makespan << " vs " << unit.makespan;
  EXPECT_LT(own.makespan, h1.makespan) << own.makespan << " vs "
                                       << h1.makespan;
  EXPECT_TRUE(verifyPrograms(config.shape, derivePrograms(own), config.costs)
                  .ok);
}

} // namespace

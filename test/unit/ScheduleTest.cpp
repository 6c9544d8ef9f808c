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

} // namespace

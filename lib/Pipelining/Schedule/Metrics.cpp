//===- Metrics.cpp - Bubbles, peaks and the published figures -------------===//
//
// What a timetable costs (makespan, busy and idle time, bubble fraction and
// ratio, peak activations per rank) and the published formulas the
// simulation must reproduce (docs/RationalePipeline.md, docs/Formulas.md).
//
//===----------------------------------------------------------------------===//

#include "par/Pipelining/Schedule.h"

#include <algorithm>

namespace par {
namespace pipeline {

std::vector<int> peakActivations(const PipelineShape &shape,
                                 const Programs &orders) {
  // Activations stay from F until the last backward action that reads them:
  // B, or BW when split (the weight gradient needs the layer inputs).
  Op freeOp = shape.splitBackward ? Op::BW : Op::B;
  std::vector<int> peaks;
  for (const std::vector<Action> &order : orders) {
    int live = 0, peak = 0;
    for (const Action &a : order) {
      if (a.op == Op::F)
        peak = std::max(peak, ++live);
      else if (a.op == freeOp)
        --live;
    }
    peaks.push_back(peak);
  }
  return peaks;
}

Metrics computeMetrics(const Timetable &tt) {
  Metrics m;
  m.makespan = tt.makespan;
  Programs orders(tt.ranks.size());
  for (size_t r = 0; r < tt.ranks.size(); ++r) {
    for (const TimedAction &t : tt.ranks[r]) {
      m.busy += t.end - t.start;
      orders[r].push_back(t.action);
    }
  }
  double total = tt.shape.p * m.makespan;
  m.idle = total - m.busy;
  m.bubbleFraction = total > 0 ? m.idle / total : 0;
  m.bubbleRatio = m.busy > 0 ? m.idle / m.busy : 0;
  m.peakActivations = peakActivations(tt.shape, orders);
  return m;
}

/// "a/b" reduced, for formula values of whole numbers.
static std::string ratioText(long num, long den) {
  long a = num, b = den;
  while (b != 0) {
    long t = a % b;
    a = b;
    b = t;
  }
  if (a == 0)
    a = 1;
  num /= a;
  den /= a;
  return den == 1 ? std::to_string(num)
                  : std::to_string(num) + "/" + std::to_string(den);
}

Expected expectedFigures(const ScheduleConfig &config) {
  const PipelineShape &s = config.shape;
  const Costs &c = config.costs;
  const long p = s.p, m = s.m, v = s.v;
  Expected e;
  bool noComm = c.comm == 0;
  switch (config.kind) {
  case ScheduleKind::GPipe:
  case ScheduleKind::OneFOneB: {
    e.ratioFormula = "(p-1)/m = " + ratioText(p - 1, m);
    e.ratio = double(p - 1) / m;
    e.fractionFormula = "(p-1)/(m+p-1) = " + ratioText(p - 1, m + p - 1);
    if (config.kind == ScheduleKind::GPipe) {
      e.peakFormula = "m";
      e.peakRank0 = s.m;
    } else {
      e.peakFormula = "min(p,m)";
      e.peakRank0 = std::min(s.p, s.m);
    }
    e.exact = noComm;
    e.scope = "T_comm = 0";
    break;
  }
  case ScheduleKind::Interleaved: {
    e.ratioFormula = "(p-1)/(v*m) = " + ratioText(p - 1, v * m);
    e.ratio = double(p - 1) / (v * m);
    e.fractionFormula =
        "(p-1)/(v*m+p-1) = " + ratioText(p - 1, v * m + p - 1);
    // Megatron's warm-up on rank 0 plus the forward that starts 1F1B, in
    // chunk activations (each 1/v of a rank's layers).
    e.peakFormula = "min(2(p-1)+(v-1)p+1, v*m) chunks";
    e.peakRank0 = static_cast<int>(
        std::min(2 * (p - 1) + (v - 1) * p + 1, v * m));
    e.exact = noComm;
    e.scope = "T_comm = 0";
    break;
  }
  case ScheduleKind::ZBH1: {
    double perRank = (p - 1) * (c.f + c.bi - c.bw);
    double ideal = m * (c.f + c.bi + c.bw);
    bool equal = c.f == c.bi && c.bi == c.bw;
    if (equal) {
      e.ratioFormula = "(p-1)/(3m) = " + ratioText(p - 1, 3 * m);
      e.fractionFormula = "(p-1)/(3m+p-1) = " + ratioText(p - 1, 3 * m + p - 1);
    } else {
      e.ratioFormula = "(p-1)(T_F+T_BI-T_BW)/(m(T_F+T_BI+T_BW))";
      e.fractionFormula = "(p-1)(T_F+T_BI-T_BW)/(m(T_F+T_BI+T_BW)+"
                          "(p-1)(T_F+T_BI-T_BW))";
    }
    e.ratio = perRank / ideal;
    e.peakFormula = "min(p,m)";
    e.peakRank0 = std::min(s.p, s.m);
    e.exact = noComm && m >= p && c.bw <= c.f && c.bw <= c.bi;
    e.scope = "m >= p, T_comm = 0 and T_BW <= min(T_F, T_BI)";
    break;
  }  case ScheduleKind::ZBV: {
    // The published figure (arXiv 2401.10241, section 6): no bubble when
    // T_F = T_BI = T_BW, with 1F1B's activation memory (2p chunks, each
    // half a stage). It is a steady-state figure: the ramp up and down
    // leave some idle time at any finite m, so it is never exact.
    e.ratioFormula = "0 (T_F = T_BI = T_BW, m >> p)";
    e.ratio = 0;
    e.fractionFormula = e.ratioFormula;
    e.peakFormula = "min(2p, 2m) chunks";
    e.peakRank0 = static_cast<int>(std::min(2 * p, 2 * m));
    e.peakIsCap = true;
    e.exact = false;
    e.scope = "m >> p, T_comm = 0 and T_F = T_BI = T_BW (a steady-state "
              "figure)";
    break;
  }
  }
  e.fraction = e.ratio / (1 + e.ratio);
  return e;
}

} // namespace pipeline
} // namespace par

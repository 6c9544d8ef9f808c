//===- Config.cpp - Shapes and configurations checked ---------------------===//
//
// The bounds every shape stays within and the checks of a configuration
// against its schedule kind (validateConfig), before anything is built.
//
//===----------------------------------------------------------------------===//

#include "par/Pipelining/Schedule.h"
#include "ScheduleDetail.h"

#include <cmath>

namespace par {
namespace pipeline {

using namespace detail;

namespace {

// Bounds that keep every run small: p*v*m = 10^6 takes about 2.5 s and
// 0.5 GB.
constexpr int kMaxRanks = 1024;
constexpr int kMaxChunks = 64;
constexpr int kMaxMicroBatches = 100000;
constexpr long kMaxStageMicroBatches = 1000000;

bool validCost(double c, bool mayBeZero) {
  return std::isfinite(c) && (mayBeZero ? c >= 0 : c > 0);
}

} // namespace

std::string detail::validateShape(const PipelineShape &shape) {
  if (shape.p < 1 || shape.p > kMaxRanks)
    return "p must be between 1 and " + std::to_string(kMaxRanks) +
           " (got " + std::to_string(shape.p) + ")";
  if (shape.m < 1 || shape.m > kMaxMicroBatches)
    return "m must be between 1 and " + std::to_string(kMaxMicroBatches) +
           " (got " + std::to_string(shape.m) + ")";
  if (shape.v < 1 || shape.v > kMaxChunks)
    return "v must be between 1 and " + std::to_string(kMaxChunks) +
           " (got " + std::to_string(shape.v) + ")";
  if (static_cast<long>(shape.numStages()) * shape.m > kMaxStageMicroBatches)
    return "p*v*m = " +
           std::to_string(static_cast<long>(shape.numStages()) * shape.m) +
           " exceeds the limit of " + std::to_string(kMaxStageMicroBatches);
  return "";
}

void applyScheduleKind(ScheduleKind kind, PipelineShape &shape) {
  shape.splitBackward = kind == ScheduleKind::ZBH1 || kind == ScheduleKind::ZBV;
  shape.vShape = kind == ScheduleKind::ZBV;
}

std::string validateConfig(ScheduleConfig &config) {
  PipelineShape &shape = config.shape;
  applyScheduleKind(config.kind, shape);
  std::string error = validateShape(shape);
  if (!error.empty())
    return error;
  if (config.kind == ScheduleKind::ZBV) {
    if (shape.v != 2)
      return "zbv places two chunks on each rank in a V, so v must be 2 "
             "(got v=" + std::to_string(shape.v) + ")";
  } else if (config.kind != ScheduleKind::Interleaved && shape.v != 1)
    return std::string(getScheduleName(config.kind)) +
           " has one stage per rank, so v must be 1 (got v=" +
           std::to_string(shape.v) + "); only interleaved and zbv take v > 1";
  if (config.kind == ScheduleKind::Interleaved && shape.m % shape.p != 0)
    return "interleaved needs m divisible by p (m=" + std::to_string(shape.m) +
           ", p=" + std::to_string(shape.p) + ")";
  const Costs &c = config.costs;
  if (!validCost(c.f, false))
    return "T_F must be a positive number (got " + formatNumber(c.f) + ")";
  if (shape.splitBackward) {
    if (!validCost(c.bi, false))
      return "T_BI must be a positive number (got " + formatNumber(c.bi) + ")";
    if (!validCost(c.bw, false))
      return "T_BW must be a positive number (got " + formatNumber(c.bw) + ")";
  } else if (!validCost(c.b, false)) {
    return "T_B must be a positive number (got " + formatNumber(c.b) + ")";
  }
  if (!validCost(c.comm, true))
    return "T_comm must be zero or positive (got " + formatNumber(c.comm) + ")";
  if (!c.stages.empty()) {
    if (static_cast<int>(c.stages.size()) != shape.numStages())
      return "per-stage costs need one entry per stage: " +
             std::to_string(shape.numStages()) + " stages, " +
             std::to_string(c.stages.size()) + " given";
    for (size_t s = 0; s < c.stages.size(); ++s) {
      const StageCosts &k = c.stages[s];
      bool ok = validCost(k.f, false) &&
                (shape.splitBackward
                     ? validCost(k.bi, false) && validCost(k.bw, false)
                     : validCost(k.b, false));
      if (!ok)
        return "stage " + std::to_string(s) +
               "'s costs must be positive numbers (T_F " + formatNumber(k.f) +
               (shape.splitBackward ? ", T_BI " + formatNumber(k.bi) +
                                          ", T_BW " + formatNumber(k.bw)
                                    : ", T_B " + formatNumber(k.b)) +
               ")";
    }
  }
  return "";
}

void Costs::takeStageMeans() {
  if (stages.empty())
    return;
  double n = static_cast<double>(stages.size());
  f = b = bi = bw = 0;
  for (const StageCosts &k : stages) {
    f += k.f / n;
    b += k.b / n;
    bi += k.bi / n;
    bw += k.bw / n;
  }
}

double Costs::of(Op op, int stage) const {
  bool own = stage >= 0 && static_cast<size_t>(stage) < stages.size();
  switch (op) {
  case Op::F:
    return own ? stages[stage].f : f;
  case Op::B:
    return own ? stages[stage].b : b;
  case Op::BI:
    return own ? stages[stage].bi : bi;
  case Op::BW:
    return own ? stages[stage].bw : bw;
  default:
    return 0;
  }
}

} // namespace pipeline
} // namespace par

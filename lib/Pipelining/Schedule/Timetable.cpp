//===- Timetable.cpp - The global timetable -------------------------------===//
//
// List scheduling of the compute orders under the cost model: every
// compute action's rank, start and end, the source of truth the per-rank
// programs are derived from.
//
//===----------------------------------------------------------------------===//

#include "par/Pipelining/Schedule.h"
#include "ScheduleDetail.h"

#include <algorithm>
#include <cmath>

namespace par {
namespace pipeline {

using namespace detail;


bool simulateTimetable(const PipelineShape &shape, const Programs &orders,
                       const Costs &costs, Timetable &out,
                       std::string &error) {
  const int p = shape.p, m = shape.m, S = shape.numStages();
  const Index idx{S};
  const Op gop = gradOp(shape);
  if (static_cast<int>(orders.size()) != p) {
    error = "compute orders for " + std::to_string(orders.size()) +
            " ranks, but p=" + std::to_string(p);
    return false;
  }
  // Each action of the right kind exactly once, on the rank of its stage.
  std::vector<int> seen(3 * static_cast<size_t>(m) * S, 0);
  auto slot = [&](Op op) { return op == Op::F ? 0 : op == Op::BW ? 2 : 1; };
  for (int r = 0; r < p; ++r) {
    for (const Action &a : orders[r]) {
      bool kindOk = a.isCompute() &&
                    (a.op == Op::F || a.op == gop ||
                     (shape.splitBackward && a.op == Op::BW));
      if (!kindOk || a.mb < 0 || a.mb >= m || a.stage < 0 || a.stage >= S ||
          shape.rankOf(a.stage) != r) {
        error = "rank " + std::to_string(r) + " cannot run " +
                describeAction(a);
        return false;
      }
      if (seen[slot(a.op) * static_cast<size_t>(m) * S + idx(a.mb, a.stage)]++) {
        error = describeAction(a) + " appears twice";
        return false;
      }
    }
  }
  for (int mb = 0; mb < m; ++mb) {
    for (int s = 0; s < S; ++s) {
      for (Op op : {Op::F, gop, Op::BW}) {
        if (op == Op::BW && !shape.splitBackward)
          continue;
        if (!seen[slot(op) * static_cast<size_t>(m) * S + idx(mb, s)]) {
          error = "no rank runs " + stageRef(op, mb, s);
          return false;
        }
      }
    }
  }

  Readiness deps(shape, costs);

  out = Timetable();
  out.shape = shape;
  out.costs = costs;
  out.ranks.assign(p, {});
  std::vector<size_t> pos(p, 0);
  std::vector<double> freeAt(p, 0);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int r = 0; r < p; ++r) {
      while (pos[r] < orders[r].size()) {
        const Action &a = orders[r][pos[r]];
        double ready = deps.readyAt(a);
        if (ready < 0)
          break;
        TimedAction t{a, std::max(freeAt[r], ready), 0};
        t.end = t.start + costs.of(a.op, a.stage);
        freeAt[r] = t.end;
        deps.finished(a, t.end);
        out.makespan = std::max(out.makespan, t.end);
        out.ranks[r].push_back(t);
        ++pos[r];
        progress = true;
      }
    }
  }
  for (int r = 0; r < p; ++r) {
    if (pos[r] < orders[r].size()) {
      error = "the compute orders wait on each other: rank " +
              std::to_string(r) + " cannot start " +
              describeAction(orders[r][pos[r]]) +
              " (an input is produced later in another rank's order)";
      return false;
    }
  }
  return true;
}

double simulateShared(const Timetable &table,
                      const std::function<double(int)> &speed) {
  const int p = table.shape.p;
  Readiness deps(table.shape, table.costs);
  std::vector<size_t> pos(p, 0);
  std::vector<double> left(p, -1); // work left of the running action
  double now = 0;
  for (;;) {
    bool done = true;
    double nextReady = INFINITY;
    for (int r = 0; r < p; ++r) {
      const std::vector<TimedAction> &order = table.ranks[r];
      if (pos[r] >= order.size())
        continue;
      done = false;
      if (left[r] >= 0)
        continue;
      double ready = deps.readyAt(order[pos[r]].action);
      if (ready >= 0 && ready <= now)
        left[r] = table.costs.of(order[pos[r]].action.op, order[pos[r]].action.stage);
      else if (ready > now)
        nextReady = std::min(nextReady, ready);
    }
    if (done)
      return now;
    int busy = 0;
    for (int r = 0; r < p; ++r)
      busy += left[r] >= 0;
    if (busy == 0) {
      if (!std::isfinite(nextReady))
        return -1;
      now = nextReady;
      continue;
    }
    double v = speed(busy);
    double step = nextReady - now;
    for (int r = 0; r < p; ++r)
      if (left[r] >= 0)
        step = std::min(step, left[r] / v);
    now += step;
    for (int r = 0; r < p; ++r) {
      if (left[r] < 0)
        continue;
      left[r] -= step * v;
      if (left[r] > 1e-12 * std::max(1.0, table.costs.b))
        continue;
      deps.finished(table.ranks[r][pos[r]].action, now);
      left[r] = -1;
      ++pos[r];
    }
  }
}

bool buildTimetable(ScheduleConfig config, Timetable &out,
                    std::string &error) {
  error = validateConfig(config);
  if (!error.empty())
    return false;
  return simulateTimetable(config.shape,
                           buildComputeOrders(config.kind, config.shape,
                                              config.costs),
                           config.costs, out, error);
}

} // namespace pipeline
} // namespace par

//===- Programs.cpp - Per-rank programs from the timetable ----------------===//
//
// The transfers added to the timetable's compute orders, in one global
// order of events for all ranks (what makes the programs deadlock-free under
// rendezvous send/recv), back to compute orders, and the receives sunk to
// their readers for a runtime whose sends do not block.
//
//===----------------------------------------------------------------------===//

#include "par/Pipelining/Schedule.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace par {
namespace pipeline {

Programs derivePrograms(const Timetable &tt) {
  const PipelineShape &shape = tt.shape;
  const int S = shape.numStages();
  // An event of a rank's program. Events sort by (time, class, k1, k2, k3):
  // transfers (class 0) at the instant their tensor is produced, computes
  // (class 1) at their start. A transfer has the same key on both ranks,
  // so all programs follow one global order.
  struct Event {
    double time;
    int cls, k1, k2, k3;
    Action action;
  };
  std::vector<std::vector<Event>> events(shape.p);
  for (int r = 0; r < shape.p; ++r) {
    for (size_t i = 0; i < tt.ranks[r].size(); ++i) {
      const TimedAction &t = tt.ranks[r][i];
      events[r].push_back(
          Event{t.start, 1, static_cast<int>(i), 0, 0, t.action});
      const Action &a = t.action;
      // The boundary this compute feeds: act(mb, s+1) or grad(mb, s).
      int boundary = -1, to = -1;
      bool act = a.op == Op::F;
      if (act && a.stage + 1 < S) {
        boundary = a.stage + 1;
        to = shape.rankOf(boundary);
      } else if ((a.op == Op::B || a.op == Op::BI) && a.stage > 0) {
        boundary = a.stage;
        to = shape.rankOf(boundary - 1);
      }
      if (boundary < 0 || to == r)
        continue;
      int kind = act ? 0 : 1;
      events[r].push_back(Event{t.end, 0, kind, a.mb, boundary,
                                Action{act ? Op::SendAct : Op::SendGrad, a.mb,
                                       boundary, to}});
      events[to].push_back(Event{t.end, 0, kind, a.mb, boundary,
                                 Action{act ? Op::RecvAct : Op::RecvGrad,
                                        a.mb, boundary, r}});
    }
  }
  Programs programs(shape.p);
  for (int r = 0; r < shape.p; ++r) {
    std::sort(events[r].begin(), events[r].end(),
              [](const Event &x, const Event &y) {
                return std::tie(x.time, x.cls, x.k1, x.k2, x.k3) <
                       std::tie(y.time, y.cls, y.k1, y.k2, y.k3);
              });
    for (const Event &e : events[r])
      programs[r].push_back(e.action);
  }
  return programs;
}

Programs computeOnly(const Programs &programs) {
  Programs orders(programs.size());
  for (size_t r = 0; r < programs.size(); ++r)
    for (const Action &a : programs[r])
      if (a.isCompute())
        orders[r].push_back(a);
  return orders;
}

Programs sinkReceives(const Programs &programs) {
  Programs out(programs.size());
  for (size_t r = 0; r < programs.size(); ++r) {
    const std::vector<Action> &prog = programs[r];
    size_t n = prog.size();
    // Where each receive goes: before the first later compute that reads
    // its tensor (F(mb, s) reads act(mb, s); B or BI (mb, s-1) reads
    // grad(mb, s)), or at the end; never past the next receive of its
    // channel (so the messages of a channel keep their order).
    std::vector<size_t> target(n, n);
    auto reads = [](const Action &c, const Action &recv) {
      if (recv.op == Op::RecvAct)
        return c.op == Op::F && c.mb == recv.mb && c.stage == recv.stage;
      return (c.op == Op::B || c.op == Op::BI) && c.mb == recv.mb &&
             c.stage + 1 == recv.stage;
    };
    for (size_t i = 0; i < n; ++i) {
      if (!prog[i].isRecv())
        continue;
      for (size_t j = i + 1; j < n; ++j)
        if (prog[j].isCompute() && reads(prog[j], prog[i])) {
          target[i] = j;
          break;
        }
    }
    // Later receives of a channel bound the earlier ones (walk backwards).
    std::map<std::pair<int, bool>, size_t> bound; // (peer, act) -> target
    for (size_t i = n; i-- > 0;) {
      if (!prog[i].isRecv())
        continue;
      auto key = std::make_pair(prog[i].peer, prog[i].op == Op::RecvAct);
      auto it = bound.find(key);
      if (it != bound.end())
        target[i] = std::min(target[i], it->second);
      bound[key] = target[i];
    }
    // Every action but the receives in order, each receive before its
    // target (those of one target in their order).
    std::vector<std::vector<size_t>> before(n + 1);
    for (size_t i = 0; i < n; ++i)
      if (prog[i].isRecv())
        before[target[i]].push_back(i);
    for (size_t j = 0; j <= n; ++j) {
      for (size_t i : before[j])
        out[r].push_back(prog[i]);
      if (j < n && !prog[j].isRecv())
        out[r].push_back(prog[j]);
    }
  }
  return out;
}

RuntimePrograms blockingReceivePrograms(const PipelineShape &shape,
                                        const Programs &programs,
                                        const Costs &costs) {
  RuntimePrograms out;
  out.programs = sinkReceives(programs);
  out.verified =
      verifyPrograms(shape, out.programs, costs, Transfers::Buffered);
  out.moved = out.verified.ok;
  if (!out.moved) {
    out.why = out.verified.errors.front();
    out.programs = programs;
    out.verified = verifyPrograms(shape, programs, costs, Transfers::Buffered);
  }
  return out;
}

RuntimePrograms cpuRuntimePrograms(const PipelineShape &shape,
                                   const Programs &programs,
                                   const Costs &costs) {
  RuntimePrograms out;
  out.programs = programs;
  out.verified = verifyPrograms(shape, programs, costs, Transfers::Posted);
  out.posted = out.verified.ok;
  if (out.posted)
    return out;
  std::string why = out.verified.errors.front();
  out = blockingReceivePrograms(shape, programs, costs);
  out.why = "receives started in place: " + why +
            (out.why.empty() ? "" : "; at their readers: " + out.why);
  return out;
}

} // namespace pipeline
} // namespace par

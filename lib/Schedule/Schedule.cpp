//===- Schedule.cpp - Pipeline-parallel schedules and their verifier ------===//
//
// See include/par/Schedule/Schedule.h and docs/RationalePipeline.md.
//
//===----------------------------------------------------------------------===//

#include "par/Schedule/Schedule.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <tuple>

namespace par {
namespace pipeline {

namespace {

// Bounds that keep every run small: p*v*m = 10^6 takes about 2.5 s and
// 0.5 GB.
constexpr int kMaxRanks = 1024;
constexpr int kMaxChunks = 64;
constexpr int kMaxMicroBatches = 100000;
constexpr long kMaxStageMicroBatches = 1000000;
// Messages the verifier collects before it gives up listing more.
constexpr size_t kMaxErrors = 20;

const char *opName(Op op) {
  switch (op) {
  case Op::F:
    return "F";
  case Op::B:
    return "B";
  case Op::BI:
    return "BI";
  case Op::BW:
    return "BW";
  case Op::SendAct:
    return "send-act";
  case Op::RecvAct:
    return "recv-act";
  case Op::SendGrad:
    return "send-grad";
  case Op::RecvGrad:
    return "recv-grad";
  }
  return "?";
}

/// "act" or "grad": the tensor a transfer moves.
const char *tensorName(Op op) {
  return op == Op::SendAct || op == Op::RecvAct ? "act" : "grad";
}

bool isActTransfer(Op op) { return op == Op::SendAct || op == Op::RecvAct; }

/// "F(mb=0,s=1)" for an action, "act(mb=0,s=1)" for a tensor.
std::string ref(const char *name, int mb, int stage) {
  return std::string(name) + "(mb=" + std::to_string(mb) +
         ",s=" + std::to_string(stage) + ")";
}

std::string stageRef(Op op, int mb, int stage) {
  return ref(opName(op), mb, stage);
}

/// The tensor a transfer moves: "act(mb=0,s=1)" or "grad(mb=0,s=1)".
std::string tensorRef(Op op, int mb, int stage) {
  return ref(tensorName(op), mb, stage);
}

Action compute(Op op, int mb, int stage) { return Action{op, mb, stage, -1}; }

double costOf(const Costs &costs, Op op) {
  switch (op) {
  case Op::F:
    return costs.f;
  case Op::B:
    return costs.b;
  case Op::BI:
    return costs.bi;
  case Op::BW:
    return costs.bw;
  default:
    return 0;
  }
}

/// The backward action that produces the input gradient: B or BI.
Op gradOp(const PipelineShape &shape) {
  return shape.splitBackward ? Op::BI : Op::B;
}

/// Dense index of (mb, stage).
struct Index {
  int stages;
  size_t operator()(int mb, int stage) const {
    return static_cast<size_t>(mb) * stages + stage;
  }
};

bool validCost(double c, bool mayBeZero) {
  return std::isfinite(c) && (mayBeZero ? c >= 0 : c > 0);
}

} // namespace

//===----------------------------------------------------------------------===//
// Names and validation
//===----------------------------------------------------------------------===//

const char *getScheduleName(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::GPipe:
    return "gpipe";
  case ScheduleKind::OneFOneB:
    return "1f1b";
  case ScheduleKind::Interleaved:
    return "interleaved";
  case ScheduleKind::ZBH1:
    return "zbh1";
  }
  return "?";
}

bool parseScheduleKind(const std::string &name, ScheduleKind &kind) {
  for (ScheduleKind k : {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                         ScheduleKind::Interleaved, ScheduleKind::ZBH1}) {
    if (name == getScheduleName(k)) {
      kind = k;
      return true;
    }
  }
  return false;
}

std::string formatNumber(double x) {
  char buf[64];
  if (std::fabs(x - std::round(x)) < 1e-9 && std::fabs(x) < 1e15)
    std::snprintf(buf, sizeof(buf), "%.0f", std::round(x));
  else
    std::snprintf(buf, sizeof(buf), "%.6g", x);
  return buf;
}

const char *getActionMnemonic(Op op) {
  switch (op) {
  case Op::F: return "fwd";
  case Op::B: return "bwd";
  case Op::BI: return "bi";
  case Op::BW: return "bw";
  case Op::SendAct: return "send_act";
  case Op::RecvAct: return "recv_act";
  case Op::SendGrad: return "send_grad";
  case Op::RecvGrad: return "recv_grad";
  }
  return "?";
}

bool parseActionMnemonic(const std::string &name, Op &op) {
  for (Op o : {Op::F, Op::B, Op::BI, Op::BW, Op::SendAct, Op::RecvAct,
               Op::SendGrad, Op::RecvGrad})
    if (name == getActionMnemonic(o)) {
      op = o;
      return true;
    }
  return false;
}

std::string formatAction(const Action &a) {
  std::string s = std::string(opName(a.op)) + "(mb=" + std::to_string(a.mb) +
                  ",s=" + std::to_string(a.stage);
  if (a.isSend())
    s += ",to=" + std::to_string(a.peer);
  else if (a.isRecv())
    s += ",from=" + std::to_string(a.peer);
  return s + ")";
}

std::string describeAction(const Action &a) {
  std::string s = stageRef(a.op, a.mb, a.stage);
  if (a.isSend())
    s += " to rank " + std::to_string(a.peer);
  else if (a.isRecv())
    s += " from rank " + std::to_string(a.peer);
  return s;
}

/// Shape checks shared by configurations and parsed program files.
static std::string validateShape(const PipelineShape &shape) {
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

std::string validateConfig(ScheduleConfig &config) {
  PipelineShape &shape = config.shape;
  shape.splitBackward = config.kind == ScheduleKind::ZBH1;
  std::string error = validateShape(shape);
  if (!error.empty())
    return error;
  if (config.kind != ScheduleKind::Interleaved && shape.v != 1)
    return std::string(getScheduleName(config.kind)) +
           " has one stage per rank, so v must be 1 (got v=" +
           std::to_string(shape.v) + "); only interleaved takes v > 1";
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
  return "";
}

//===----------------------------------------------------------------------===//
// Compute orders
//===----------------------------------------------------------------------===//

/// GPipe: every forward, then every backward (in micro-batch order, as
/// PiPPy's ScheduleGPipe).
static std::vector<Action> gpipeOrder(const PipelineShape &shape, int r) {
  std::vector<Action> order;
  for (int mb = 0; mb < shape.m; ++mb)
    order.push_back(compute(Op::F, mb, r));
  for (int mb = 0; mb < shape.m; ++mb)
    order.push_back(compute(Op::B, mb, r));
  return order;
}

/// PipeDream-Flush: p-1-r warm-up forwards, then one forward and one
/// backward alternately, then the remaining backwards.
static std::vector<Action> oneFOneBOrder(const PipelineShape &shape, int r) {
  std::vector<Action> order;
  int warmup = std::min(shape.p - 1 - r, shape.m);
  for (int mb = 0; mb < warmup; ++mb)
    order.push_back(compute(Op::F, mb, r));
  for (int i = 0; i < shape.m - warmup; ++i) {
    order.push_back(compute(Op::F, warmup + i, r));
    order.push_back(compute(Op::B, i, r));
  }
  for (int mb = shape.m - warmup; mb < shape.m; ++mb)
    order.push_back(compute(Op::B, mb, r));
  return order;
}

/// ZB-H1 (arXiv 2401.10241, section 2.1): 1F1B with B split into BI and
/// BW, where rank r runs each BW r steps after its BI. Every rank then
/// holds at most p activations (p-1-r warm-up forwards + 1 + r deferred
/// BWs), and the r deferred BWs fill rank r's cool-down bubble: the last
/// rank finishes its BIs p-1 steps early, so gradients reach rank 0 sooner.
static std::vector<Action> zbh1Order(const PipelineShape &shape, int r) {
  std::vector<Action> order;
  int warmup = std::min(shape.p - 1 - r, shape.m);
  std::deque<int> pendingW;
  auto backward = [&](int mb) {
    order.push_back(compute(Op::BI, mb, r));
    pendingW.push_back(mb);
    if (static_cast<int>(pendingW.size()) > r) {
      order.push_back(compute(Op::BW, pendingW.front(), r));
      pendingW.pop_front();
    }
  };
  for (int mb = 0; mb < warmup; ++mb)
    order.push_back(compute(Op::F, mb, r));
  for (int i = 0; i < shape.m - warmup; ++i) {
    order.push_back(compute(Op::F, warmup + i, r));
    backward(i);
  }
  for (int mb = shape.m - warmup; mb < shape.m; ++mb)
    backward(mb);
  for (int mb : pendingW)
    order.push_back(compute(Op::BW, mb, r));
  return order;
}

/// Megatron's interleaved 1F1B (arXiv 2104.04473 section 2.2,
/// forward_backward_pipelining_with_interleaving): micro-batches go through
/// the chunks in groups of p; forwards visit chunks 0..v-1, backwards
/// v-1..0. Warm-up is 2(p-1-r) + (v-1)p forwards.
static std::vector<Action> interleavedOrder(const PipelineShape &shape,
                                            int r) {
  const int p = shape.p, v = shape.v, total = shape.m * shape.v;
  auto action = [&](int k, bool forward) {
    int inGroup = k % (p * v);
    int chunk = inGroup / p;
    if (!forward)
      chunk = v - 1 - chunk;
    int mb = (k / (p * v)) * p + k % p;
    return compute(forward ? Op::F : Op::B, mb, chunk * p + r);
  };
  std::vector<Action> order;
  int warmup = std::min(2 * (p - 1 - r) + (v - 1) * p, total);
  for (int k = 0; k < warmup; ++k)
    order.push_back(action(k, true));
  for (int k = 0; k < total - warmup; ++k) {
    order.push_back(action(warmup + k, true));
    order.push_back(action(k, false));
  }
  for (int k = total - warmup; k < total; ++k)
    order.push_back(action(k, false));
  return order;
}

Programs buildComputeOrders(ScheduleKind kind, const PipelineShape &shape) {
  Programs orders(shape.p);
  for (int r = 0; r < shape.p; ++r) {
    switch (kind) {
    case ScheduleKind::GPipe:
      orders[r] = gpipeOrder(shape, r);
      break;
    case ScheduleKind::OneFOneB:
      orders[r] = oneFOneBOrder(shape, r);
      break;
    case ScheduleKind::Interleaved:
      orders[r] = interleavedOrder(shape, r);
      break;
    case ScheduleKind::ZBH1:
      orders[r] = zbh1Order(shape, r);
      break;
    }
  }
  return orders;
}

//===----------------------------------------------------------------------===//
// The timetable
//===----------------------------------------------------------------------===//

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

  // End times; -1 while not run.
  std::vector<double> endF(static_cast<size_t>(m) * S, -1), endG(endF),
      endW(endF);
  auto hop = [&](int from, int to) {
    return shape.rankOf(from) == shape.rankOf(to) ? 0.0 : costs.comm;
  };
  // Ready time of `a`, or -1 if an input is missing.
  auto readyAt = [&](const Action &a) -> double {
    size_t i = idx(a.mb, a.stage);
    switch (a.op) {
    case Op::F:
      if (a.stage == 0)
        return 0;
      if (endF[idx(a.mb, a.stage - 1)] < 0)
        return -1;
      return endF[idx(a.mb, a.stage - 1)] + hop(a.stage - 1, a.stage);
    case Op::B:
    case Op::BI: {
      if (endF[i] < 0)
        return -1;
      if (a.stage == S - 1)
        return endF[i];
      double g = endG[idx(a.mb, a.stage + 1)];
      if (g < 0)
        return -1;
      return std::max(endF[i], g + hop(a.stage + 1, a.stage));
    }
    case Op::BW:
      return endG[i];
    default:
      return -1;
    }
  };

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
        double ready = readyAt(a);
        if (ready < 0)
          break;
        TimedAction t{a, std::max(freeAt[r], ready), 0};
        t.end = t.start + costOf(costs, a.op);
        freeAt[r] = t.end;
        size_t i = idx(a.mb, a.stage);
        (a.op == Op::F ? endF : a.op == Op::BW ? endW : endG)[i] = t.end;
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

bool buildTimetable(ScheduleConfig config, Timetable &out,
                    std::string &error) {
  error = validateConfig(config);
  if (!error.empty())
    return false;
  return simulateTimetable(config.shape,
                           buildComputeOrders(config.kind, config.shape),
                           config.costs, out, error);
}

//===----------------------------------------------------------------------===//
// Per-rank programs
//===----------------------------------------------------------------------===//

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

//===----------------------------------------------------------------------===//
// Metrics and formulas
//===----------------------------------------------------------------------===//

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
  }
  }
  e.fraction = e.ratio / (1 + e.ratio);
  return e;
}

//===----------------------------------------------------------------------===//
// Verification
//===----------------------------------------------------------------------===//

namespace {

/// Where a transfer of boundary `stage` must run: act(mb, s) goes from the
/// rank of stage s-1 to the rank of stage s, grad(mb, s) back.
struct Route {
  int from, to;
};

Route routeOf(const PipelineShape &shape, Op op, int stage) {
  int up = shape.rankOf(stage - 1), down = shape.rankOf(stage);
  return isActTransfer(op) ? Route{up, down} : Route{down, up};
}

class Verifier {
public:
  Verifier(const PipelineShape &shape, const Programs &programs,
           const Costs &costs)
      : shape(shape), programs(programs), costs(costs),
        S(shape.numStages()), idx{shape.numStages()} {}

  VerifyResult run() {
    if (static_cast<int>(programs.size()) != shape.p) {
      error("there are programs for " + std::to_string(programs.size()) +
            " ranks, but p=" + std::to_string(shape.p));
      return finish();
    }
    // Misplaced actions are left out of the counts, so both checks report;
    // the simulation assumes what they establish.
    checkActions();
    checkCounts();
    if (result.errors.empty())
      simulate();
    return finish();
  }

private:
  void error(const std::string &message) {
    if (result.errors.size() < kMaxErrors)
      result.errors.push_back(message);
    else if (result.errors.size() == kMaxErrors)
      result.errors.push_back("(more errors not shown)");
  }

  VerifyResult finish() {
    result.ok = result.errors.empty();
    return result;
  }

  size_t countSlot(Op op, int mb, int stage) const {
    return static_cast<size_t>(op) * shape.m * S + idx(mb, stage);
  }

  /// Ranges, ownership and the routes of transfers.
  void checkActions() {
    counts.assign(8 * static_cast<size_t>(shape.m) * S, 0);
    for (int r = 0; r < shape.p; ++r) {
      std::string where = "rank " + std::to_string(r) + ": ";
      for (const Action &a : programs[r]) {
        bool transfer = !a.isCompute();
        if (a.mb < 0 || a.mb >= shape.m || a.stage < (transfer ? 1 : 0) ||
            a.stage >= S ||
            (transfer && (a.peer < 0 || a.peer >= shape.p))) {
          error(where + formatAction(a) + " is out of range (m=" +
                std::to_string(shape.m) + ", " + std::to_string(S) +
                " stages, p=" + std::to_string(shape.p) + ")");
          continue;
        }
        if (!transfer) {
          int owner = shape.rankOf(a.stage);
          if (owner != r) {
            error(where + "runs " + describeAction(a) + ", but stage " +
                  std::to_string(a.stage) + " lives on rank " +
                  std::to_string(owner));
            continue;
          }
          bool split = a.op == Op::BI || a.op == Op::BW;
          if (a.op != Op::F && split != shape.splitBackward) {
            error(where + "runs " + describeAction(a) + ", but the backward" +
                  (shape.splitBackward ? " is split (BI and BW)"
                                       : " is one action B"));
            continue;
          }
        } else {
          Route route = routeOf(shape, a.op, a.stage);
          std::string tensor = tensorRef(a.op, a.mb, a.stage);
          if (route.from == route.to) {
            error(where + formatAction(a) + ": " + tensor +
                  " stays on rank " + std::to_string(route.from) +
                  ", nothing to transfer");
            continue;
          }
          int self = a.isSend() ? route.from : route.to;
          int peer = a.isSend() ? route.to : route.from;
          if (r != self || a.peer != peer) {
            error(where + formatAction(a) + ", but " + tensor +
                  " goes from rank " + std::to_string(route.from) +
                  " to rank " + std::to_string(route.to));
            continue;
          }
        }
        ++counts[countSlot(a.op, a.mb, a.stage)];
      }
    }
  }

  /// Every compute once; every transfer once on each side.
  void checkCounts() {
    std::vector<Op> computeOps = {Op::F};
    if (shape.splitBackward) {
      computeOps.push_back(Op::BI);
      computeOps.push_back(Op::BW);
    } else {
      computeOps.push_back(Op::B);
    }
    for (int mb = 0; mb < shape.m; ++mb) {
      for (int s = 0; s < S; ++s) {
        for (Op op : computeOps) {
          int n = counts[countSlot(op, mb, s)];
          std::string owner = "rank " + std::to_string(shape.rankOf(s));
          if (n == 0)
            error("missing compute: " + owner + " never runs " +
                  stageRef(op, mb, s));
          else if (n > 1)
            error("duplicate compute: " + owner + " runs " +
                  stageRef(op, mb, s) + " " + std::to_string(n) + " times");
        }
        if (s == 0 || shape.rankOf(s - 1) == shape.rankOf(s))
          continue;
        for (Op send : {Op::SendAct, Op::SendGrad}) {
          Op recv = send == Op::SendAct ? Op::RecvAct : Op::RecvGrad;
          Route route = routeOf(shape, send, s);
          int ns = counts[countSlot(send, mb, s)];
          int nr = counts[countSlot(recv, mb, s)];
          std::string from = "rank " + std::to_string(route.from);
          std::string to = "rank " + std::to_string(route.to);
          if (ns > 1)
            error("duplicate transfer: " + from + " has " +
                  stageRef(send, mb, s) + " " + std::to_string(ns) + " times");
          if (nr > 1)
            error("duplicate transfer: " + to + " has " +
                  stageRef(recv, mb, s) + " " + std::to_string(nr) + " times");
          if (ns == 0 && nr == 0)
            error("missing transfer: " + tensorRef(send, mb, s) +
                  " is never sent from " + from + " to " + to);
          else if (ns == 0)
            error("unmatched transfer: " + to + " has " +
                  stageRef(recv, mb, s) + ", but " + from +
                  " never sends it");
          else if (nr == 0)
            error("unmatched transfer: " + from + " has " +
                  stageRef(send, mb, s) + ", but " + to +
                  " never receives it");
        }
      }
    }
  }

  /// What `a` needs on its rank that has not happened yet; empty if none.
  std::string missingInput(const Action &a) const {
    size_t i = idx(a.mb, a.stage);
    const Op gop = gradOp(shape);
    switch (a.op) {
    case Op::F:
      if (a.stage == 0)
        return "";
      if (shape.rankOf(a.stage - 1) == shape.rankOf(a.stage))
        return doneF[idx(a.mb, a.stage - 1)]
                   ? ""
                   : stageRef(Op::F, a.mb, a.stage - 1);
      return gotAct[i] ? ""
                       : describeAction(Action{Op::RecvAct, a.mb, a.stage,
                                               shape.rankOf(a.stage - 1)});
    case Op::B:
    case Op::BI:
      if (!doneF[i])
        return stageRef(Op::F, a.mb, a.stage);
      if (a.stage == S - 1)
        return "";
      if (shape.rankOf(a.stage + 1) == shape.rankOf(a.stage))
        return doneG[idx(a.mb, a.stage + 1)]
                   ? ""
                   : stageRef(gop, a.mb, a.stage + 1);
      return gotGrad[idx(a.mb, a.stage + 1)]
                 ? ""
                 : describeAction(Action{Op::RecvGrad, a.mb, a.stage + 1,
                                         shape.rankOf(a.stage + 1)});
    case Op::BW:
      return doneG[i] ? "" : stageRef(Op::BI, a.mb, a.stage);
    case Op::SendAct:
      return doneF[idx(a.mb, a.stage - 1)]
                 ? ""
                 : stageRef(Op::F, a.mb, a.stage - 1);
    case Op::SendGrad:
      return doneG[i] ? "" : stageRef(gop, a.mb, a.stage);
    default:
      return "";
    }
  }

  void checkInputs(int r, const Action &a) {
    std::string missing = missingInput(a);
    if (!missing.empty())
      error("dependency violation: rank " + std::to_string(r) + " runs " +
            describeAction(a) + " before " + missing);
  }

  void markDone(const Action &a) {
    size_t i = idx(a.mb, a.stage);
    switch (a.op) {
    case Op::F:
      doneF[i] = 1;
      break;
    case Op::B:
    case Op::BI:
      doneG[i] = 1;
      break;
    case Op::RecvAct:
      gotAct[i] = 1;
      break;
    case Op::RecvGrad:
      gotGrad[i] = 1;
      break;
    default:
      break;
    }
  }

  /// Runs the ranks with blocking send/recv; a send and a recv complete
  /// together once both ranks have reached them.
  void simulate() {
    size_t n = static_cast<size_t>(shape.m) * S;
    doneF.assign(n, 0);
    doneG.assign(n, 0);
    gotAct.assign(n, 0);
    gotGrad.assign(n, 0);
    const int p = shape.p;
    std::vector<size_t> pos(p, 0);
    std::vector<double> clock(p, 0);
    auto next = [&](int r) -> const Action * {
      return pos[r] < programs[r].size() ? &programs[r][pos[r]] : nullptr;
    };
    bool progress = true;
    while (progress) {
      progress = false;
      for (int r = 0; r < p; ++r) {
        while (const Action *a = next(r)) {
          if (a->isCompute()) {
            checkInputs(r, *a);
            markDone(*a);
            clock[r] += costOf(costs, a->op);
            ++pos[r];
            progress = true;
            continue;
          }
          int q = a->peer;
          const Action *b = next(q);
          if (!b || b->isCompute() || b->peer != r || b->isSend() == a->isSend())
            break; // r waits for q
          const Action &send = a->isSend() ? *a : *b;
          const Action &recv = a->isSend() ? *b : *a;
          int sender = a->isSend() ? r : q, receiver = a->isSend() ? q : r;
          if (isActTransfer(send.op) != isActTransfer(recv.op) ||
              send.mb != recv.mb || send.stage != recv.stage) {
            error("mismatched transfer: rank " + std::to_string(sender) +
                  " sends " + tensorRef(send.op, send.mb, send.stage) +
                  " to rank " + std::to_string(receiver) + ", but rank " +
                  std::to_string(receiver) + " waits in " +
                  describeAction(recv));
            return;
          }
          checkInputs(sender, send);
          markDone(recv);
          double end = std::max(clock[r], clock[q]) + costs.comm;
          clock[r] = clock[q] = end;
          ++pos[r];
          ++pos[q];
          ++result.transfers;
          progress = true;
        }
      }
    }
    std::vector<int> blocked;
    for (int r = 0; r < p; ++r)
      if (next(r))
        blocked.push_back(r);
    if (blocked.empty()) {
      result.blockingMakespan = *std::max_element(clock.begin(), clock.end());
      return;
    }
    reportDeadlock(blocked, pos);
  }

  /// Follows the wait-for edges from the first blocked rank to a cycle and
  /// names every rank on it with the action it is blocked in.
  void reportDeadlock(const std::vector<int> &blocked,
                      const std::vector<size_t> &pos) {
    auto stuckIn = [&](int r) -> const Action * {
      return pos[r] < programs[r].size() ? &programs[r][pos[r]] : nullptr;
    };
    std::vector<int> chain;
    std::vector<int> seenAt(shape.p, -1);
    int r = blocked.front();
    while (r >= 0 && seenAt[r] < 0) {
      seenAt[r] = static_cast<int>(chain.size());
      chain.push_back(r);
      const Action *a = stuckIn(r);
      r = a ? a->peer : -1;
    }
    if (r < 0) {
      // The chain ends at a rank that finished (cannot happen once the
      // counts check passed, but say it plainly if it does).
      int finished = chain.back();
      int waiting = chain[chain.size() - 2];
      error("deadlock: rank " + std::to_string(waiting) + " waits in " +
            describeAction(*stuckIn(waiting)) + ", but rank " +
            std::to_string(finished) + " has finished its program");
      return;
    }
    std::vector<int> cycle(chain.begin() + seenAt[r], chain.end());
    std::rotate(cycle.begin(),
                std::min_element(cycle.begin(), cycle.end()), cycle.end());
    std::string message = "deadlock: rank " + std::to_string(cycle[0]) +
                          " waits in " + describeAction(*stuckIn(cycle[0]));
    for (size_t i = 1; i < cycle.size(); ++i)
      message += std::string(i == 1 ? ", but" : ", and") + " rank " +
                 std::to_string(cycle[i]) + " is blocked in " +
                 describeAction(*stuckIn(cycle[i]));
    size_t others = blocked.size() - cycle.size();
    if (others)
      message += " (" + std::to_string(others) + " more rank" +
                 (others == 1 ? "" : "s") + " wait behind them)";
    error(message);
  }

  const PipelineShape &shape;
  const Programs &programs;
  const Costs &costs;
  const int S;
  const Index idx;
  std::vector<int> counts;
  std::vector<char> doneF, doneG, gotAct, gotGrad;
  VerifyResult result;
};

} // namespace

VerifyResult verifyPrograms(const PipelineShape &shape,
                            const Programs &programs, const Costs &costs) {
  std::string error = validateShape(shape);
  if (!error.empty()) {
    VerifyResult result;
    result.errors.push_back(error);
    return result;
  }
  return Verifier(shape, programs, costs).run();
}

//===----------------------------------------------------------------------===//
// Text formats
//===----------------------------------------------------------------------===//

std::string printPrograms(const PipelineShape &shape,
                          const Programs &programs) {
  std::string out = "pipeline p=" + std::to_string(shape.p) +
                    " m=" + std::to_string(shape.m) +
                    " v=" + std::to_string(shape.v) + " backward=" +
                    (shape.splitBackward ? "split" : "full") + "\n";
  for (size_t r = 0; r < programs.size(); ++r) {
    out += "rank " + std::to_string(r) + ":";
    for (const Action &a : programs[r])
      out += " " + formatAction(a);
    out += "\n";
  }
  return out;
}

namespace {

/// A whole non-negative decimal number, or -1.
long parseCount(const std::string &text) {
  if (text.empty() || text.size() > 9)
    return -1;
  for (char c : text)
    if (c < '0' || c > '9')
      return -1;
  return std::strtol(text.c_str(), nullptr, 10);
}

std::vector<std::string> splitWords(const std::string &line) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i])))
      ++i;
    size_t start = i;
    while (i < line.size() &&
           !std::isspace(static_cast<unsigned char>(line[i])))
      ++i;
    if (i > start)
      words.push_back(line.substr(start, i - start));
  }
  return words;
}

/// Parses one action token; returns "" or a message.
std::string parseAction(const std::string &word, const PipelineShape &shape,
                        Action &a) {
  size_t open = word.find('(');
  if (open == std::string::npos || word.back() != ')')
    return "malformed action '" + word +
           "' (expected e.g. F(mb=0,s=0) or send-act(mb=0,s=1,to=1))";
  std::string name = word.substr(0, open);
  bool found = false;
  for (Op op : {Op::F, Op::B, Op::BI, Op::BW, Op::SendAct, Op::RecvAct,
                Op::SendGrad, Op::RecvGrad}) {
    if (name == opName(op)) {
      a.op = op;
      found = true;
    }
  }
  if (!found)
    return "unknown action '" + name + "' in '" + word +
           "' (expected F, B, BI, BW, send-act, recv-act, send-grad or "
           "recv-grad)";
  std::string peerKey = a.isSend() ? "to" : a.isRecv() ? "from" : "";
  long mb = -1, stage = -1, peer = -1;
  std::string args = word.substr(open + 1, word.size() - open - 2);
  size_t i = 0;
  while (i <= args.size()) {
    size_t comma = args.find(',', i);
    if (comma == std::string::npos)
      comma = args.size();
    std::string item = args.substr(i, comma - i);
    size_t eq = item.find('=');
    long value = eq == std::string::npos ? -1 : parseCount(item.substr(eq + 1));
    std::string key = eq == std::string::npos ? item : item.substr(0, eq);
    long *slot = key == "mb"  ? &mb
                 : key == "s" ? &stage
                 : (!peerKey.empty() && key == peerKey) ? &peer
                                                        : nullptr;
    if (!slot || value < 0 || *slot >= 0)
      return "malformed argument '" + item + "' in '" + word + "'";
    *slot = value;
    i = comma + 1;
  }
  if (mb < 0 || stage < 0 || (!peerKey.empty() && peer < 0))
    return "'" + word + "' needs mb=, s=" +
           (peerKey.empty() ? "" : " and " + peerKey + "=");
  if (mb >= shape.m)
    return "'" + word + "': micro-batch " + std::to_string(mb) +
           " out of range (m=" + std::to_string(shape.m) + ")";
  if (stage >= shape.numStages())
    return "'" + word + "': stage " + std::to_string(stage) +
           " out of range (" + std::to_string(shape.numStages()) + " stages)";
  if (!peerKey.empty() && peer >= shape.p)
    return "'" + word + "': rank " + std::to_string(peer) +
           " out of range (p=" + std::to_string(shape.p) + ")";
  a.mb = static_cast<int>(mb);
  a.stage = static_cast<int>(stage);
  a.peer = peerKey.empty() ? -1 : static_cast<int>(peer);
  return "";
}

/// Parses "pipeline p=2 m=4 v=1 backward=full"; returns "" or a message.
std::string parseHeader(const std::vector<std::string> &words,
                        PipelineShape &shape) {
  long p = -1, m = -1, v = 1;
  std::string backward = "full";
  for (size_t i = 1; i < words.size(); ++i) {
    const std::string &w = words[i];
    size_t eq = w.find('=');
    std::string key = w.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : w.substr(eq + 1);
    if (key == "backward" && (value == "full" || value == "split")) {
      backward = value;
      continue;
    }
    long *slot = key == "p" ? &p : key == "m" ? &m : key == "v" ? &v : nullptr;
    long n = parseCount(value);
    if (!slot || n < 0)
      return "malformed header item '" + w +
             "' (expected p=N m=N [v=N] [backward=full|split])";
    *slot = n;
  }
  if (p < 0 || m < 0)
    return "the pipeline header needs p= and m=";
  shape.p = static_cast<int>(p);
  shape.m = static_cast<int>(m);
  shape.v = static_cast<int>(v);
  shape.splitBackward = backward == "split";
  return validateShape(shape);
}

} // namespace

bool parsePrograms(const std::string &text, const std::string &name,
                   PipelineShape &shape, Programs &programs,
                   std::string &error) {
  bool haveHeader = false;
  size_t lineNo = 0, start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos)
      end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    ++lineNo;
    std::string where = name + ":" + std::to_string(lineNo) + ": ";
    size_t hash = line.find('#');
    if (hash != std::string::npos)
      line.resize(hash);
    std::vector<std::string> words = splitWords(line);
    if (words.empty())
      continue;
    if (words[0] == "pipeline") {
      if (haveHeader) {
        error = where + "a second pipeline header";
        return false;
      }
      std::string message = parseHeader(words, shape);
      if (!message.empty()) {
        error = where + message;
        return false;
      }
      haveHeader = true;
      programs.assign(shape.p, {});
      continue;
    }
    if (!haveHeader) {
      error = where + "expected 'pipeline p=N m=N [v=N] "
                      "[backward=full|split]' before any rank line";
      return false;
    }
    // "rank 3:" (or "rank 3 :").
    std::string rankText = words.size() > 1 ? words[1] : "";
    size_t first = 2;
    if (!rankText.empty() && rankText.back() == ':') {
      rankText.pop_back();
    } else if (words.size() > 2 && words[2] == ":") {
      first = 3;
    } else {
      rankText.clear();
    }
    long r = parseCount(rankText);
    if (words[0] != "rank" || r < 0) {
      error = where + "expected 'rank N: actions...', got '" + words[0] +
              (words.size() > 1 ? " " + words[1] : "") + "'";
      return false;
    }
    if (r >= shape.p) {
      error = where + "rank " + std::to_string(r) + " out of range (p=" +
              std::to_string(shape.p) + ")";
      return false;
    }
    for (size_t i = first; i < words.size(); ++i) {
      Action a;
      std::string message = parseAction(words[i], shape, a);
      if (!message.empty()) {
        error = where + message;
        return false;
      }
      programs[r].push_back(a);
    }
  }
  if (!haveHeader) {
    error = name + ": no 'pipeline p=N m=N' header (empty file?)";
    return false;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// The diagram
//===----------------------------------------------------------------------===//

std::string renderDiagram(const Timetable &tt) {
  const PipelineShape &shape = tt.shape;
  // The time quantum: the shortest duration, or a half, third or quarter of
  // it, so that every start and end falls on a column boundary. Without one
  // (or with more than 1000 columns) the actions are listed with times.
  double shortest = 0;
  for (const auto &rank : tt.ranks)
    for (const TimedAction &t : rank)
      if (shortest == 0 || t.end - t.start < shortest)
        shortest = t.end - t.start;
  if (tt.costs.comm > 0 && tt.costs.comm < shortest)
    shortest = tt.costs.comm;
  auto aligned = [&](double q) {
    for (const auto &rank : tt.ranks)
      for (const TimedAction &t : rank)
        for (double x : {t.start, t.end})
          if (std::fabs(x / q - std::round(x / q)) > 1e-6)
            return false;
    return true;
  };
  double quantum = 0;
  for (int k = 1; k <= 4 && shortest > 0; ++k) {
    if (aligned(shortest / k)) {
      quantum = shortest / k;
      break;
    }
  }
  long columns = quantum > 0 ? std::lround(tt.makespan / quantum) : 0;
  auto label = [&](const Action &a) {
    std::string s = a.op == Op::F ? "F" : a.op == Op::BW ? "W" : "B";
    s += std::to_string(a.mb);
    if (shape.v > 1)
      s += "." + std::to_string(a.stage / shape.p);
    return s;
  };
  std::string rankWidth = std::to_string(shape.p - 1);
  auto rowName = [&](const std::string &name) {
    std::string s = name;
    s.resize(std::max(s.size(), 5 + rankWidth.size()), ' ');
    return s + " |";
  };
  std::string out;
  if (quantum == 0 || columns > 1000) {
    // Durations without a common quantum: list the actions with times.
    for (int r = 0; r < shape.p; ++r) {
      out += rowName("rank " + std::to_string(r));
      for (const TimedAction &t : tt.ranks[r])
        out += " " + label(t.action) + "@" + formatNumber(t.start) + "-" +
               formatNumber(t.end);
      out += "\n";
    }
    return out;
  }
  size_t width = 1;
  for (const auto &rank : tt.ranks)
    for (const TimedAction &t : rank)
      width = std::max(width, label(t.action).size());
  std::vector<std::vector<std::string>> grid(
      shape.p, std::vector<std::string>(columns, "."));
  for (int r = 0; r < shape.p; ++r)
    for (const TimedAction &t : tt.ranks[r])
      for (long c = std::lround(t.start / quantum),
                e = std::lround(t.end / quantum);
           c < e && c < columns; ++c)
        grid[r][c] = label(t.action);
  auto pad = [&](std::string s) {
    s.resize(std::max(s.size(), width), ' ');
    return s;
  };
  // A time tick every 5 columns.
  std::string ticks = rowName("time");
  for (long c = 0; c < columns; c += 5) {
    std::string tick = " " + formatNumber(c * quantum);
    tick.resize(5 * (width + 1), ' ');
    ticks += tick;
  }
  while (!ticks.empty() && ticks.back() == ' ')
    ticks.pop_back();
  out += ticks + "\n";
  for (int r = 0; r < shape.p; ++r) {
    std::string row = rowName("rank " + std::to_string(r));
    for (long c = 0; c < columns; ++c)
      row += " " + pad(grid[r][c]);
    while (!row.empty() && row.back() == ' ')
      row.pop_back();
    out += row + "\n";
  }
  out += "(one column = " + formatNumber(quantum) +
         " time unit; F forward, B backward" +
         (shape.splitBackward ? " (input gradient), W weight gradient"
                              : "") +
         (shape.v > 1 ? ", Fm.c micro-batch m on the rank's chunk c" : "") + ", . idle)\n";
  return out;
}

} // namespace pipeline
} // namespace par

//===- ComputeOrders.cpp - Each schedule kind's compute orders ------------===//
//
// Which compute action each pipeline rank runs in which order, one function
// per schedule kind: GPipe, 1F1B (PipeDream-Flush), ZB-H1, Megatron's
// interleaved 1F1B and ZB-V (docs/RationalePipeline.md).
//
//===----------------------------------------------------------------------===//

#include "par/Pipelining/Schedule.h"
#include "ScheduleDetail.h"

#include <algorithm>
#include <deque>
#include <limits>

namespace par {
namespace pipeline {

using namespace detail;

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

/// ZB-V (arXiv 2401.10241, section 6): two chunks per rank in a V (rank r
/// holds stages r and 2p-1-r), the backward split into BI and BW. The
/// orders come from list scheduling on the costs, as the paper's automatic
/// scheduler does, under 1F1B's activation memory: whenever a rank is free
/// it runs, of the actions whose inputs are there, a BI (the critical
/// path; lowest micro-batch, then highest stage), else an F the memory
/// cap allows (same order), else the oldest deferred BW, else it waits.
/// The cap is 2p chunk activations (p stages' worth, as 1F1B holds on
/// rank 0), counted from F to BW, with `reserveEach` an F of the first
/// chunk also reserves a slot for the same micro-batch's second-chunk F,
/// so the second chunk can always proceed and the cap never deadlocks;
/// without, one slot stays free for a second-chunk F. The ranks advance in
/// time order (the free rank with the earliest clock decides next), so
/// every input that is ready by that time is known.
static bool zbvOrders(const PipelineShape &shape, const Costs &costs,
                      bool reserveEach, Programs &orders, double &makespan) {
  const int p = shape.p, m = shape.m;
  const double never = std::numeric_limits<double>::infinity();
  Readiness deps(shape, costs);
  // When an action may start (never: an input is not scheduled yet).
  auto ready = [&](Op op, int mb, int s) {
    double t = deps.readyAt(compute(op, mb, s));
    return t < 0 ? never : t;
  };
  struct Rank {
    int stage[2];            // chunk 0's and chunk 1's stage
    int nextF[2] = {0, 0};   // next micro-batch of each chunk's F
    int nextBI[2] = {0, 0};  // ... and BI
    std::deque<Action> pendingW;
    int held = 0;      // activations held (F done, BW not)
    int committed = 0; // held plus second-chunk Fs owed
    double clock = 0;
    size_t left = 0;
    // 0: decides at `clock`; 1: found nothing there, lets the others free
    // then decide first; 2: found nothing and no time to wait for.
    int waiting = 0;
  };
  const int cap = 2 * p;
  std::vector<Rank> ranks(p);
  for (int r = 0; r < p; ++r) {
    ranks[r].stage[0] = r;
    ranks[r].stage[1] = 2 * p - 1 - r;
    ranks[r].left = 6 * static_cast<size_t>(m);
  }
  orders.assign(p, {});
  makespan = 0;
  size_t remaining = 6 * static_cast<size_t>(m) * p;
  while (remaining > 0) {
    // The busy rank that is free first decides (of those free at once, one
    // that has not found itself waiting there).
    int r = -1;
    auto before = [&](const Rank &a, const Rank &b) {
      return a.clock < b.clock ||
             (a.clock == b.clock && a.waiting < b.waiting);
    };
    for (int q = 0; q < p; ++q)
      if (ranks[q].left > 0 && (r < 0 || before(ranks[q], ranks[r])))
        r = q;
    Rank &k = ranks[r];
    const double t = k.clock;
    // The best ready action, and the earliest time a waiting one is ready.
    Action pick{Op::F, -1, -1, -1};
    double soonest = never;
    auto consider = [&](Op op, int mb, int s, double ready) {
      if (ready > t) {
        soonest = std::min(soonest, ready);
        return;
      }
      if (pick.mb < 0 || mb < pick.mb || (mb == pick.mb && s > pick.stage))
        pick = compute(op, mb, s);
    };
    for (int c = 0; c < 2; ++c)
      if (k.nextBI[c] < m)
        consider(Op::BI, k.nextBI[c], k.stage[c],
                 ready(Op::BI, k.nextBI[c], k.stage[c]));
    if (pick.mb < 0)
      for (int c = 0; c < 2; ++c)
        if (k.nextF[c] < m &&
            (reserveEach ? c == 1 || k.committed + 2 <= cap
                         : k.held + (c == 0 ? 2 : 1) <= cap))
          consider(Op::F, k.nextF[c], k.stage[c],
                   ready(Op::F, k.nextF[c], k.stage[c]));
    if (pick.mb < 0 && !k.pendingW.empty()) {
      pick = k.pendingW.front();
      k.pendingW.pop_front();
    }
    if (pick.mb < 0) {
      // Nothing to run: let a rank that is free at t too decide first (what
      // it runs may be what this one needs), else wait for the next input
      // or the next rank to become free.
      bool othersFirst = false, othersAtT = false;
      double next = soonest;
      for (int q = 0; q < p; ++q) {
        if (q == r || ranks[q].left == 0)
          continue;
        if (ranks[q].clock > t)
          next = std::min(next, ranks[q].clock);
        else if (ranks[q].waiting == 0)
          othersFirst = true;
        else if (ranks[q].waiting == 1)
          othersAtT = true;
      }
      if (othersFirst) {
        k.waiting = 1;
        continue;
      }
      if (next == never) {
        if (!othersAtT)
          return false; // every rank stuck
        k.waiting = 2;   // the others at t may know when they go on
        continue;
      }
      k.clock = next;
      k.waiting = 0;
      continue;
    }
    for (Rank &q : ranks)
      q.waiting = 0;
    double cost = costs.of(pick.op, pick.stage);
    int c = pick.stage == k.stage[0] ? 0 : 1;
    deps.finished(pick, t + cost);
    if (pick.op == Op::F) {
      ++k.nextF[c];
      k.committed += c == 0 ? 2 : 0;
      ++k.held;
    } else if (pick.op == Op::BI) {
      ++k.nextBI[c];
      k.pendingW.push_back(compute(Op::BW, pick.mb, pick.stage));
    } else {
      --k.committed;
      --k.held;
    }
    orders[r].push_back(pick);
    k.clock = t + cost;
    makespan = std::max(makespan, k.clock);
    --k.left;
    --remaining;
  }
  return true;
}

/// ZB-V's orders: the better of two caps. Counting each first-chunk F
/// with the second-chunk F it owes never deadlocks but holds only p
/// micro-batches' first chunks; keeping one slot free for a second-chunk
/// F holds up to 2p-1, as the paper's warm-up does, and may deadlock
/// (then the first is the one).
static Programs zbvOrders(const PipelineShape &shape, const Costs &costs) {
  Programs safe, tight;
  double safeSpan = 0, tightSpan = 0;
  bool safeOk = zbvOrders(shape, costs, true, safe, safeSpan);
  bool tightOk = zbvOrders(shape, costs, false, tight, tightSpan);
  if (tightOk && (!safeOk || tightSpan < safeSpan))
    return tight;
  return safe; // complete (if not, simulateTimetable names what is missing)
}

Programs buildComputeOrders(ScheduleKind kind, const PipelineShape &shape,
                            const Costs &costs) {
  if (kind == ScheduleKind::ZBV)
    return zbvOrders(shape, costs);
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
    case ScheduleKind::ZBV:
      break; // above
    }
  }
  return orders;
}

} // namespace pipeline
} // namespace par

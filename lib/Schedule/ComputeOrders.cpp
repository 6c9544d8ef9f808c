//===- ComputeOrders.cpp - Each schedule kind's compute orders ------------===//
//
// Which compute action each pipeline rank runs in which order, one function
// per schedule kind: GPipe, 1F1B (PipeDream-Flush), ZB-H1 and Megatron's
// interleaved 1F1B (docs/RationalePipeline.md).
//
//===----------------------------------------------------------------------===//

#include "par/Schedule/Schedule.h"
#include "ScheduleDetail.h"

#include <algorithm>
#include <deque>

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

} // namespace pipeline
} // namespace par

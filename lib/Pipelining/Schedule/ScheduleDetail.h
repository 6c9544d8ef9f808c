//===- ScheduleDetail.h - What the schedule core's files share -*- C++ -*-===//
//
// Private to lib/Pipelining/Schedule (MLIR's TypeDetail.h habit): names of actions and
// tensors for messages, the cost of an action, the dense (micro-batch, stage)
// index and the shape checks that configurations, parsed program files and
// the verifier share. Not installed, not part of Schedule.h's API.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_LIB_SCHEDULE_SCHEDULEDETAIL_H
#define PAR_LIB_SCHEDULE_SCHEDULEDETAIL_H

#include "par/Pipelining/Schedule.h"

#include <algorithm>
#include <vector>

#include <cstddef>
#include <string>

namespace par {
namespace pipeline {
namespace detail {

inline const char *opName(Op op) {
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
inline const char *tensorName(Op op) {
  return op == Op::SendAct || op == Op::RecvAct ? "act" : "grad";
}

inline bool isActTransfer(Op op) {
  return op == Op::SendAct || op == Op::RecvAct;
}

/// "F(mb=0,s=1)" for an action, "act(mb=0,s=1)" for a tensor.
inline std::string ref(const char *name, int mb, int stage) {
  return std::string(name) + "(mb=" + std::to_string(mb) +
         ",s=" + std::to_string(stage) + ")";
}

inline std::string stageRef(Op op, int mb, int stage) {
  return ref(opName(op), mb, stage);
}

/// The tensor a transfer moves: "act(mb=0,s=1)" or "grad(mb=0,s=1)".
inline std::string tensorRef(Op op, int mb, int stage) {
  return ref(tensorName(op), mb, stage);
}

inline Action compute(Op op, int mb, int stage) {
  return Action{op, mb, stage, -1};
}


/// The backward action that produces the input gradient: B or BI.
inline Op gradOp(const PipelineShape &shape) {
  return shape.splitBackward ? Op::BI : Op::B;
}

/// Dense index of (mb, stage).
struct Index {
  int stages;
  size_t operator()(int mb, int stage) const {
    return static_cast<size_t>(mb) * stages + stage;
  }
};

/// When each compute action's inputs are ready: F(mb,s) after F(mb,s-1),
/// B/BI(mb,s) after F(mb,s) and B/BI(mb,s+1), BW after BI; plus `comm`
/// when the producer is on another rank. End times are -1 until recorded.
/// The timetable's simulation and ZB-V's list scheduling share it.
struct Readiness {
  Readiness(const PipelineShape &shape, const Costs &costs)
      : shape(shape), costs(costs), idx{shape.numStages()},
        endF(static_cast<size_t>(shape.m) * shape.numStages(), -1),
        endG(endF), endW(endF) {}

  /// The ready time of `a`, or -1 if an input is missing.
  double readyAt(const Action &a) const {
    const int S = shape.numStages();
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
  }

  void finished(const Action &a, double end) {
    size_t i = idx(a.mb, a.stage);
    (a.op == Op::F ? endF : a.op == Op::BW ? endW : endG)[i] = end;
  }

  double hop(int from, int to) const {
    return shape.rankOf(from) == shape.rankOf(to) ? 0.0 : costs.comm;
  }

  const PipelineShape &shape;
  const Costs &costs;
  Index idx;
  std::vector<double> endF, endG, endW;
};

/// Shape checks shared by configurations and parsed program files: "" or a
/// message ("p must be between 1 and 1024 (got 0)").
std::string validateShape(const PipelineShape &shape);

} // namespace detail
} // namespace pipeline
} // namespace par

#endif // PAR_LIB_SCHEDULE_SCHEDULEDETAIL_H

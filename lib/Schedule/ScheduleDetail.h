//===- ScheduleDetail.h - What the schedule core's files share -*- C++ -*-===//
//
// Private to lib/Schedule (MLIR's TypeDetail.h habit): names of actions and
// tensors for messages, the cost of an action, the dense (micro-batch, stage)
// index and the shape checks that configurations, parsed program files and
// the verifier share. Not installed, not part of Schedule.h's API.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_LIB_SCHEDULE_SCHEDULEDETAIL_H
#define PAR_LIB_SCHEDULE_SCHEDULEDETAIL_H

#include "par/Schedule/Schedule.h"

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

inline double costOf(const Costs &costs, Op op) {
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

/// Shape checks shared by configurations and parsed program files: "" or a
/// message ("p must be between 1 and 1024 (got 0)").
std::string validateShape(const PipelineShape &shape);

} // namespace detail
} // namespace pipeline
} // namespace par

#endif // PAR_LIB_SCHEDULE_SCHEDULEDETAIL_H

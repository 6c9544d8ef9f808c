//===- Names.cpp - Schedule kinds, actions and numbers as text ------------===//
//
// The names of schedule kinds and actions (the text format's, the IR's
// mnemonics) and how actions and times read in messages.
//
//===----------------------------------------------------------------------===//

#include "par/Pipelining/Schedule.h"
#include "ScheduleDetail.h"

#include <cmath>
#include <cstdio>

namespace par {
namespace pipeline {

using namespace detail;

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
  case ScheduleKind::ZBV:
    return "zbv";
  }
  return "?";
}

bool parseScheduleKind(const std::string &name, ScheduleKind &kind) {
  for (ScheduleKind k : {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                         ScheduleKind::Interleaved, ScheduleKind::ZBH1,
                         ScheduleKind::ZBV}) {
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

} // namespace pipeline
} // namespace par

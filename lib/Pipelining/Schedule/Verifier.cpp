//===- Verifier.cpp - The deadlock verifier of per-rank programs ----------===//
//
// Proves per-rank programs complete, well-formed and free of deadlock under
// blocking (rendezvous) send/recv, under par-run's sends with blocking
// receives (buffered) or with receives started in place and waited for by
// their readers (posted), by simulating the ranks, and names what is wrong
// otherwise (verifyPrograms).
//
//===----------------------------------------------------------------------===//

#include "par/Pipelining/Schedule.h"
#include "ScheduleDetail.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <tuple>

namespace par {
namespace pipeline {

using namespace detail;

namespace {

// Messages the verifier collects before it gives up listing more.
constexpr size_t kMaxErrors = 20;

/// Where a transfer of boundary `stage` must run: act(mb, s) goes from the
/// rank of stage s-1 to the rank of stage s, grad(mb, s) back.
struct Route {
  int from, to;
};

Route routeOf(const PipelineShape &shape, Op op, int stage) {
  int up = shape.rankOf(stage - 1), down = shape.rankOf(stage);
  return isActTransfer(op) ? Route{up, down} : Route{down, up};
}

/// A message in a channel, or a posted receive waiting for one.
struct Message {
  int mb, stage;
  double arrival;
};

class Verifier {
public:
  Verifier(const PipelineShape &shape, const Programs &programs,
           const Costs &costs, Transfers transfers)
      : shape(shape), programs(programs), costs(costs), transfers(transfers),
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

  /// Runs the ranks with blocking send/recv (a send and a recv complete
  /// together once both ranks have reached them) or buffered sends.
  void simulate() {
    size_t n = static_cast<size_t>(shape.m) * S;
    doneF.assign(n, 0);
    doneG.assign(n, 0);
    gotAct.assign(n, 0);
    gotGrad.assign(n, 0);
    const int p = shape.p;
    std::vector<size_t> pos(p, 0);
    std::vector<double> clock(p, 0);
    inFlight.assign(p, 0);
    takenAt.assign(p, 0);
    arrivalAct.assign(n, -1);
    arrivalGrad.assign(n, -1);
    auto next = [&](int r) -> const Action * {
      return pos[r] < programs[r].size() ? &programs[r][pos[r]] : nullptr;
    };
    bool progress = true;
    while (progress) {
      progress = false;
      for (int r = 0; r < p; ++r) {
        while (const Action *a = next(r)) {
          if (a->isCompute()) {
            if (transfers == Transfers::Posted && !receivedInput(r, *a, clock))
              break; // r waits for its posted receive's message
            checkInputs(r, *a);
            markDone(*a);
            clock[r] += costs.of(a->op, a->stage);
            ++pos[r];
            progress = true;
            continue;
          }
          if (transfers == Transfers::Posted) {
            if (!posted(r, *a, clock))
              break; // r's send waits for its earlier ones
            ++pos[r];
            progress = true;
            continue;
          }
          if (transfers == Transfers::Buffered) {
            if (!buffered(r, *a, clock))
              break; // r waits for the message
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
    if (mismatched)
      return;
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

  /// par-run's sends (Buffered, Posted): a send starts once its rank's
  /// earlier sends are taken (false: r waits), after them in time.
  bool startSend(int r, const Action &a, std::vector<double> &clock) {
    if (inFlight[r] > 0)
      return false;
    checkInputs(r, a);
    clock[r] = std::max(clock[r], takenAt[r]);
    return true;
  }

  /// A transfer under Transfers::Buffered: a send first waits until every
  /// earlier send of its rank has been taken by its receiver (par-run
  /// completes the sends in flight before it starts the next, and an
  /// MPI_Isend past the eager limit completes only once the receive is
  /// posted), then leaves its message in its channel (sender, receiver,
  /// kind); a receive takes the channel's next message, which must be its
  /// tensor, at the later of its rank's clock and the message's arrival.
  /// False: r must wait (a send still in flight, no message yet, or a
  /// mismatch, reported).
  bool buffered(int r, const Action &a, std::vector<double> &clock) {
    bool act = isActTransfer(a.op);
    if (a.isSend()) {
      if (!startSend(r, a, clock))
        return false;
      channels[{r, a.peer, act}].push_back(
          {a.mb, a.stage, clock[r] + costs.comm});
      ++inFlight[r];
      return true;
    }
    std::deque<Message> &queue = channels[{a.peer, r, act}];
    if (queue.empty())
      return false;
    const Message &msg = queue.front();
    if (msg.mb != a.mb || msg.stage != a.stage) {
      Op sent = act ? Op::SendAct : Op::SendGrad;
      if (!mismatched)
        error("mismatched transfer: rank " + std::to_string(a.peer) +
              " sends " + tensorRef(sent, msg.mb, msg.stage) + " to rank " +
              std::to_string(r) + " first, but rank " + std::to_string(r) +
              " waits in " + describeAction(a) +
              " (one channel delivers in the order sent)");
      mismatched = true;
      return false;
    }
    markDone(a);
    clock[r] = std::max(clock[r], msg.arrival);
    queue.pop_front();
    --inFlight[a.peer];
    takenAt[a.peer] = std::max(takenAt[a.peer], clock[r]);
    ++result.transfers;
    return true;
  }

  /// The tensor a compute reads from another rank (its act or grad slot),
  /// and that rank; false when it reads none.
  bool remoteInput(const Action &a, bool &act, size_t &slot, int &from) const {
    if (a.op == Op::F && a.stage > 0 &&
        shape.rankOf(a.stage - 1) != shape.rankOf(a.stage)) {
      act = true;
      slot = idx(a.mb, a.stage);
      from = shape.rankOf(a.stage - 1);
      return true;
    }
    if ((a.op == Op::B || a.op == Op::BI) && a.stage + 1 < S &&
        shape.rankOf(a.stage + 1) != shape.rankOf(a.stage)) {
      act = false;
      slot = idx(a.mb, a.stage + 1);
      from = shape.rankOf(a.stage + 1);
      return true;
    }
    return false;
  }

  /// Transfers::Posted, before compute `a` of rank r: the tensor it reads
  /// from another rank has arrived (its clock moves to the arrival), or r
  /// waits for it (false) when its receive is posted and unmatched. A
  /// tensor never received is left to checkInputs.
  bool receivedInput(int r, const Action &a, std::vector<double> &clock) {
    bool act;
    size_t slot;
    int from;
    if (!remoteInput(a, act, slot, from))
      return true;
    const std::vector<double> &arrival = act ? arrivalAct : arrivalGrad;
    if (arrival[slot] >= 0) {
      clock[r] = std::max(clock[r], arrival[slot]);
      return true;
    }
    return !(act ? postedAct : postedGrad).count(slot);
  }

  /// A transfer under Transfers::Posted: a receive is started where the
  /// program lists it and never blocks; the compute reading its tensor
  /// waits for the message (receivedInput). A send first waits until every
  /// earlier send of its rank is matched by a started receive (par-run
  /// completes the sends in flight before the next; a posted receive
  /// matches a message at once, and a rank blocked in a wait drives the
  /// transfers it has posted), then matches the channel's oldest posted
  /// receive or waits in the channel for the next one. One channel
  /// matches in order. False: a send still in flight (r waits), or a
  /// mismatch (reported).
  bool posted(int r, const Action &a, std::vector<double> &clock) {
    bool act = isActTransfer(a.op);
    if (a.isSend()) {
      if (!startSend(r, a, clock))
        return false;
      std::deque<Message> &waiting = postedRecvs[{r, a.peer, act}];
      if (waiting.empty()) {
        channels[{r, a.peer, act}].push_back(
            {a.mb, a.stage, clock[r] + costs.comm});
        ++inFlight[r];
        return true;
      }
      Message want = waiting.front();
      if (!matches(a.peer, r, act, want, {a.mb, a.stage, 0}))
        return false;
      waiting.pop_front();
      arrive(act, want, clock[r] + costs.comm);
      takenAt[r] = std::max(takenAt[r], clock[r]);
      return true;
    }
    markDone(a);
    (act ? postedAct : postedGrad).insert(idx(a.mb, a.stage));
    std::deque<Message> &queue = channels[{a.peer, r, act}];
    Message want{a.mb, a.stage, 0};
    if (queue.empty()) {
      postedRecvs[{a.peer, r, act}].push_back(want);
      return true;
    }
    const Message msg = queue.front();
    if (!matches(r, a.peer, act, want, msg))
      return false;
    queue.pop_front();
    arrive(act, want, msg.arrival);
    --inFlight[a.peer];
    takenAt[a.peer] = std::max(takenAt[a.peer], clock[r]);
    return true;
  }

  /// Transfers::Posted: receiver r's posted receive `want` against the
  /// message `got` from `sender`; a mismatch is reported once.
  bool matches(int r, int sender, bool act, const Message &want,
               const Message &got) {
    if (got.mb == want.mb && got.stage == want.stage)
      return true;
    Op sent = act ? Op::SendAct : Op::SendGrad;
    Op recv = act ? Op::RecvAct : Op::RecvGrad;
    if (!mismatched)
      error("mismatched transfer: rank " + std::to_string(sender) +
            " sends " + tensorRef(sent, got.mb, got.stage) + " to rank " +
            std::to_string(r) + ", but rank " + std::to_string(r) +
            " started " +
            describeAction(Action{recv, want.mb, want.stage, sender}) +
            " first (one channel matches in the order posted)");
    mismatched = true;
    return false;
  }

  void arrive(bool act, const Message &m, double at) {
    size_t slot = idx(m.mb, m.stage);
    (act ? postedAct : postedGrad).erase(slot);
    (act ? arrivalAct : arrivalGrad)[slot] = at;
    ++result.transfers;
  }

  /// The rank a blocked action waits for: a transfer's peer, or the rank
  /// that sends the tensor a compute reads (Transfers::Posted).
  int waitsOn(const Action *a) const {
    if (!a)
      return -1;
    bool act;
    size_t slot;
    int from;
    if (a->isCompute())
      return remoteInput(*a, act, slot, from) ? from : -1;
    return a->peer;
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
      r = waitsOn(stuckIn(r));
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
  const Transfers transfers;
  const int S;
  const Index idx;
  std::vector<int> counts;
  std::vector<char> doneF, doneG, gotAct, gotGrad;
  // Transfers::Buffered: the messages sent and not yet received, by
  // (sender, receiver, act).
  std::map<std::tuple<int, int, bool>, std::deque<Message>> channels;
  // Per rank: its sends not yet taken, and when the last was taken.
  std::vector<int> inFlight;
  std::vector<double> takenAt;
  // Transfers::Posted: started receives not yet matched, by channel and
  // by tensor slot, and when each received tensor arrived (-1: not yet).
  std::map<std::tuple<int, int, bool>, std::deque<Message>> postedRecvs;
  std::set<size_t> postedAct, postedGrad;
  std::vector<double> arrivalAct, arrivalGrad;
  bool mismatched = false;
  VerifyResult result;
};

} // namespace

VerifyResult verifyPrograms(const PipelineShape &shape,
                            const Programs &programs, const Costs &costs,
                            Transfers transfers) {
  std::string error = validateShape(shape);
  if (!error.empty()) {
    VerifyResult result;
    result.errors.push_back(error);
    return result;
  }
  return Verifier(shape, programs, costs, transfers).run();
}

} // namespace pipeline
} // namespace par

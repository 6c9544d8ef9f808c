//===- Schedule.h - Pipeline-parallel schedules and their verifier -*- C++ -*-===//
//
// The pipeline-schedule core: which compute action each pipeline rank runs
// in which order (GPipe, 1F1B, interleaved 1F1B, ZB-H1, ZB-V), one global
// timetable computed from those orders and a cost model, the per-rank
// programs (compute plus point-to-point transfers) derived from that single
// timetable, and a verifier that proves a set of per-rank programs free of
// deadlock under blocking (rendezvous) send/recv.
//
// docs/RationalePipeline.md explains the design, the formulas and the text
// formats. The library is plain C++17 (no MLIR, no LLVM) and reports errors
// as strings, never by exceptions (LLVM builds with -fno-exceptions).
//
// Thread safety: every function is pure over its arguments; calls on
// distinct objects may run concurrently.
//
// lib/Pipelining/Schedule implements it one concern per file: Names.cpp (kinds,
// actions and numbers as text), Config.cpp (validateConfig),
// ComputeOrders.cpp (one order per schedule kind), Timetable.cpp
// (simulateTimetable, buildTimetable), Programs.cpp (derivePrograms,
// computeOnly), Metrics.cpp (bubbles, peaks, expectedFigures), Verifier.cpp
// (verifyPrograms), TextFormat.cpp (printPrograms, parsePrograms) and
// Diagram.cpp (renderDiagram).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_PIPELINING_SCHEDULE_H
#define PAR_PIPELINING_SCHEDULE_H

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace par {
namespace pipeline {

//===----------------------------------------------------------------------===//
// Shapes, costs and actions
//===----------------------------------------------------------------------===//

enum class ScheduleKind { GPipe, OneFOneB, Interleaved, ZBH1, ZBV };

/// "gpipe", "1f1b", "interleaved", "zbh1", "zbv".
const char *getScheduleName(ScheduleKind kind);
/// Parses a name printed by getScheduleName; false if unknown.
bool parseScheduleKind(const std::string &name, ScheduleKind &kind);

/// The pipeline's shape: p ranks, m micro-batches, v model chunks (virtual
/// stages) per rank. There are S = p*v stages; stage s lives on rank s mod p
/// (Megatron's interleaved placement; v = 1 puts stage s on rank s), or,
/// with `vShape` (ZB-V), chunk k = s / p runs down the ranks when k is even
/// and back up when it is odd, so rank r holds stages r and 2p-1-r and the
/// first and last stage share rank 0. `splitBackward` says whether the
/// backward pass is one action B or the pair BI (input gradient) + BW
/// (weight gradient).
struct PipelineShape {
  int p = 1;
  int m = 1;
  int v = 1;
  bool splitBackward = false;
  bool vShape = false;

  int numStages() const { return p * v; }
  int rankOf(int stage) const {
    int pos = stage % p;
    return vShape && (stage / p) % 2 == 1 ? p - 1 - pos : pos;
  }
  /// The stages of rank r, in increasing order.
  std::vector<int> stagesOf(int r) const {
    std::vector<int> out;
    for (int s = 0; s < numStages(); ++s)
      if (rankOf(s) == r)
        out.push_back(s);
    return out;
  }
};

/// Sets what the schedule kind implies of a shape: the split backward
/// (zbh1, zbv) and the V placement (zbv).
void applyScheduleKind(ScheduleKind kind, PipelineShape &shape);

/// Every action a pipeline rank runs. For transfers, `stage` names the
/// boundary by the stage whose *input* the tensor belongs to: act(mb, s) is
/// the output of stage s-1 that stage s consumes, grad(mb, s) is the
/// gradient of stage s's input that stage s-1 consumes. So 1 <= s < S.
enum class Op : uint8_t { F, B, BI, BW, SendAct, RecvAct, SendGrad, RecvGrad };

/// One stage's action costs, in the units of Costs.
struct StageCosts {
  double f = 1;
  double b = 2;
  double bi = 1;
  double bw = 1;
};

/// Cost of one action, in arbitrary time units. `b` is the full backward;
/// `bi` and `bw` the two halves of a split one. `comm` is the latency of
/// one transfer between stages on different ranks (0: free). `stages`, when
/// not empty, gives each stage its own costs (one entry per stage; the
/// uniform ones then stand for a mean stage in formulas): stages differ
/// (the first has no input gradient, so its BI is empty and its BW the
/// whole backward; the last computes the loss), and ZB-V's list schedule
/// orders its actions by what they cost.
struct Costs {
  double f = 1;
  double b = 2;
  double bi = 1;
  double bw = 1;
  double comm = 0;
  std::vector<StageCosts> stages;

  /// The cost of `op` on `stage` (0 for transfers).
  double of(Op op, int stage) const;
  /// Sets the uniform costs to the means of `stages` (if any).
  void takeStageMeans();
};

/// One action: see Op.
struct Action {
  Op op = Op::F;
  int mb = 0;
  int stage = 0;
  /// The other rank of a transfer; -1 for compute actions.
  int peer = -1;

  bool isCompute() const { return op <= Op::BW; }
  bool isSend() const { return op == Op::SendAct || op == Op::SendGrad; }
  bool isRecv() const { return op == Op::RecvAct || op == Op::RecvGrad; }
  bool operator==(const Action &o) const {
    return op == o.op && mb == o.mb && stage == o.stage && peer == o.peer;
  }
  bool operator!=(const Action &o) const { return !(*this == o); }
};

/// A time or cost for messages: whole numbers without a fraction ("12"),
/// others with 6 significant digits ("2.5").
std::string formatNumber(double x);

/// The action's name in the IR's typed form (#par.program) and the
/// manifest: "fwd", "bwd", "bi", "bw", "send_act", "recv_act", "send_grad",
/// "recv_grad".
const char *getActionMnemonic(Op op);
/// Parses a name printed by getActionMnemonic; false if unknown.
bool parseActionMnemonic(const std::string &name, Op &op);

/// The token of the program text format: "F(mb=0,s=1)",
/// "send-act(mb=0,s=1,to=1)", "recv-grad(mb=3,s=2,from=2)".
std::string formatAction(const Action &action);
/// The same action for messages: "recv-act(mb=2,s=1) from rank 0".
std::string describeAction(const Action &action);

/// Per-rank ordered action lists (index = rank).
using Programs = std::vector<std::vector<Action>>;

struct ScheduleConfig {
  ScheduleKind kind = ScheduleKind::OneFOneB;
  PipelineShape shape;
  Costs costs;
};

/// Checks p, m, v and the costs against the schedule kind; returns an empty
/// string when valid, else a message ("interleaved needs m divisible by p
/// (m=6, p=4)"). Sets shape.splitBackward and shape.vShape from the kind.
std::string validateConfig(ScheduleConfig &config);

//===----------------------------------------------------------------------===//
// Compute orders and the global timetable
//===----------------------------------------------------------------------===//

/// Each rank's ordered compute actions for a (validated) configuration.
/// ZB-V's orders are list-scheduled on `costs` (the others do not depend
/// on them).
Programs buildComputeOrders(ScheduleKind kind, const PipelineShape &shape,
                            const Costs &costs = Costs());

struct TimedAction {
  Action action;
  double start = 0;
  double end = 0;
};

/// The source of truth: every compute action with its rank, start and end.
struct Timetable {
  PipelineShape shape;
  Costs costs;
  /// ranks[r] in execution order.
  std::vector<std::vector<TimedAction>> ranks;
  double makespan = 0;
};

/// List scheduling: each rank runs its actions in the given order, each as
/// early as its rank is free and its inputs are ready (F(mb,s) after
/// F(mb,s-1), B/BI(mb,s) after F(mb,s) and B/BI(mb,s+1), BW after BI; plus
/// `comm` when the producer is on another rank). Returns false and sets
/// `error` if the orders wait on each other forever or are incomplete.
bool simulateTimetable(const PipelineShape &shape, const Programs &orders,
                       const Costs &costs, Timetable &out, std::string &error);

/// Builds, checks and simulates in one go.
bool buildTimetable(ScheduleConfig config, Timetable &out, std::string &error);

/// The makespan of `table`'s per-rank orders, with simulateTimetable's
/// dependencies, when ranks that compute at once slow each other down (they
/// share processors): while k ranks compute, each does speed(k) units of
/// its action's cost per unit of time. Returns -1 if the orders cannot
/// proceed (not for a table simulateTimetable built).
double simulateShared(const Timetable &table,
                      const std::function<double(int)> &speed);

//===----------------------------------------------------------------------===//
// Per-rank programs
//===----------------------------------------------------------------------===//

/// Adds the transfers to the timetable's compute orders. Every transfer is
/// an event at the instant its tensor is produced; each rank's program lists
/// its events in one global order (time, transfers before computes, then a
/// fixed tie-break), so each send directly follows the compute producing it
/// and each recv precedes the compute needing it. One global order for all
/// ranks is what makes the programs deadlock-free under rendezvous.
Programs derivePrograms(const Timetable &timetable);

/// The compute actions of `programs`, in order (transfers dropped).
Programs computeOnly(const Programs &programs);

/// `programs` with every receive moved down to just before the compute that
/// reads its tensor, the receives of one channel (peer and kind: act or
/// grad) kept in their order. For a runtime whose sends block less than
/// rendezvous (Transfers::Buffered): a receive placed at its tensor's
/// planned arrival blocks the computes listed after it when the tensor
/// comes later than planned (real costs are not the timetable's), although
/// they do not read it. The result must be verified: under rendezvous it
/// may deadlock, and under Transfers::Buffered it completes for one stage
/// per rank (the sweep checks p, m <= 16) but not for most programs of
/// several (a send waits for an earlier one whose receive moved behind a
/// send of the peer's).
Programs sinkReceives(const Programs &programs);

//===----------------------------------------------------------------------===//
// Metrics and reference formulas
//===----------------------------------------------------------------------===//

struct Metrics {
  double makespan = 0;
  /// Sum over ranks of compute time (the "ideal" time times p).
  double busy = 0;
  /// p * makespan - busy.
  double idle = 0;
  /// idle / (p * makespan): the bubble over total time (GPipe paper).
  double bubbleFraction = 0;
  /// idle / busy: the bubble relative to ideal time (Megatron, ZB paper).
  double bubbleRatio = 0;
  /// Peak number of (micro-batch, stage) activations held per rank: counted
  /// from F until B, or until BW when the backward is split.
  std::vector<int> peakActivations;
};

Metrics computeMetrics(const Timetable &timetable);
/// Peak activations per rank of any compute order.
std::vector<int> peakActivations(const PipelineShape &shape,
                                 const Programs &orders);

/// The published figures for a configuration (docs/RationalePipeline.md).
/// They assume comm = 0; `exact` says whether the simulation must reproduce
/// them exactly for this shape and these costs.
struct Expected {
  std::string ratioFormula;
  double ratio = 0;
  std::string fractionFormula;
  double fraction = 0;
  std::string peakFormula;
  int peakRank0 = 0;
  /// peakRank0 is a cap the schedule keeps to, not its exact peak (ZB-V).
  bool peakIsCap = false;
  bool exact = false;
  /// When the bubble formulas hold ("T_comm = 0 and m >= p").
  std::string scope;
};

Expected expectedFigures(const ScheduleConfig &config);

//===----------------------------------------------------------------------===//
// Verification
//===----------------------------------------------------------------------===//

/// What a send waits for. Rendezvous: the matching receive (MPI_Ssend;
/// NCCL's send on a stream). Buffered (par-run's CPU runtime): its rank's
/// earlier sends taken by their receivers, as par-run completes the sends
/// in flight before it starts the next (an MPI_Isend past the eager limit
/// completes only once matched), then nothing; a receive takes the next
/// message of its channel, in the order they were sent. Posted (par-run's
/// CPU runtime): sends as Buffered, a send's message matched once its
/// receive is started; a receive is started where the program lists it
/// (MPI_Irecv) and never blocks, and the compute that reads its tensor
/// waits for the message.
enum class Transfers { Rendezvous, Buffered, Posted };

struct VerifyResult {
  bool ok = false;
  /// Each a full sentence ("deadlock: rank 1 waits in ...").
  std::vector<std::string> errors;
  /// Transfers matched by the simulation.
  unsigned transfers = 0;
  /// Makespan of the programs under the transfers verified (blocking
  /// send/recv by default), when ok.
  double blockingMakespan = 0;
};

/// Proves `programs` complete, well-formed and free of deadlock under
/// blocking send/recv (a send completes only when the matching recv is
/// posted, as MPI_Ssend): simulates the ranks, matching each send with the
/// peer's next recv from this rank (same kind, micro-batch and stage, in
/// order). Reports missing/duplicate computes, misplaced actions, unmatched
/// or mismatched transfers, uses before definition and deadlocks naming the
/// blocked ranks and actions. Under Transfers::Buffered a send waits for
/// its rank's earlier sends to be received, then completes, and a receive
/// waits for the next message of its channel, which must be its tensor.
VerifyResult verifyPrograms(const PipelineShape &shape,
                            const Programs &programs, const Costs &costs,
                            Transfers transfers = Transfers::Rendezvous);

/// What par-run's CPU runtime runs of verified `programs`: the programs
/// themselves with their receives started in place and waited for by
/// their readers (`posted`) where they complete so (Transfers::Posted; a
/// receive posted where a blocking one completes, waited for no earlier
/// than its reader, should always do), else, with blocking receives,
/// sinkReceives's programs where they complete under its sends
/// (Transfers::Buffered, `moved`), else the stored ones. `why`: the first
/// error of what was tried and not taken; `verified`: what runs, verified
/// under its transfers.
struct RuntimePrograms {
  Programs programs;
  bool posted = false;
  bool moved = false;
  std::string why;
  VerifyResult verified;
};
RuntimePrograms cpuRuntimePrograms(const PipelineShape &shape,
                                   const Programs &programs,
                                   const Costs &costs);
/// The blocking-receive half of the above: sinkReceives's programs where
/// they complete under Transfers::Buffered (`moved`), else the stored
/// ones (`why`: the moved ones' first error).
RuntimePrograms blockingReceivePrograms(const PipelineShape &shape,
                                        const Programs &programs,
                                        const Costs &costs);

//===----------------------------------------------------------------------===//
// Text formats
//===----------------------------------------------------------------------===//

/// The program text format:
///   # comment
///   pipeline p=2 m=2 v=1 backward=full [placement=v]
///   rank 0: F(mb=0,s=0) send-act(mb=0,s=1,to=1) ...
///   rank 1: recv-act(mb=0,s=1,from=0) F(mb=0,s=1) ...
/// Several lines for one rank append to its program.
std::string printPrograms(const PipelineShape &shape, const Programs &programs);
/// Parses the format above; `name` prefixes messages ("f.txt:3: ...").
bool parsePrograms(const std::string &text, const std::string &name,
                   PipelineShape &shape, Programs &programs,
                   std::string &error);

/// One line per rank, one column per time quantum:
///   rank 0 | F0 F1 .  .  B0 B0 .  B1 B1
/// F/B/W are forward, backward (or its input half BI) and weight gradient;
/// with v > 1 the label carries the chunk ("F3.1"); '.' is idle.
std::string renderDiagram(const Timetable &timetable);

} // namespace pipeline
} // namespace par

#endif // PAR_PIPELINING_SCHEDULE_H

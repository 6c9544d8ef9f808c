//===- PipelineExecutor.cpp - Running a pipelined train step --------------===//
//
// The pipelined step executor's loading, action interpreter, step and
// updates (PipelineRun.h has the class and how it is split). The action
// interpreter is over the session API. Parameters are initialised
// exactly as the unpipelined step's arguments of the same index, so the
// loss trajectory can be checked against that step on one rank. Data
// arguments come from the corpus (--data) or, without one, from the
// generator's values of the unpipelined step's m-fold arguments.
//
// Residency: parameters, optimizer and loss-scale state, compression
// buffers, activations, stashed stage inputs and gradients live in session
// buffers (device memory for a GPU program; host memory for a CPU one, the
// same path; which is held when is PipelineBuffers, PipelineMemory.h, whose
// simulation predicts the peak), transfers send and receive them in
// place, and the update's results replace the parameters and state by
// swapping buffers. What
// crosses to the host each step: the data arguments (in, per call), the
// last stage's loss (out, per micro-batch), loss scaling's scale and
// finite flag (one element each), and, for a GPU program only, the
// parameter gradients of each backward (out, per micro-batch), which the
// host sums over the micro-batches (the programs have no kernel that adds
// two buffers; the sums go back in once per step, before the update). A
// CPU program's gradients are summed where they are, straight into the
// buffers the update reads (the first backward of a step copies, the
// others add). The trained parameters and state come out once, after
// training, for sampling and the error norm.
//
//===----------------------------------------------------------------------===//

#include "par/Pipelining/PipelineExecutor.h"

#include "PipelineRun.h"

namespace par::tooling {

namespace pl = par::pipeline;

// The session's action codes are lib/Pipelining/Schedule's.
static_assert(PAR_PIPELINE_FWD == (int)pl::Op::F &&
                  PAR_PIPELINE_BWD == (int)pl::Op::B &&
                  PAR_PIPELINE_BWD_INPUT == (int)pl::Op::BI &&
                  PAR_PIPELINE_BWD_WEIGHT == (int)pl::Op::BW &&
                  PAR_PIPELINE_SEND_ACT == (int)pl::Op::SendAct &&
                  PAR_PIPELINE_RECV_ACT == (int)pl::Op::RecvAct &&
                  PAR_PIPELINE_SEND_GRAD == (int)pl::Op::SendGrad &&
                  PAR_PIPELINE_RECV_GRAD == (int)pl::Op::RecvGrad,
              "par_pipeline_op_t and par::pipeline::Op disagree");

namespace pipeline_run {

namespace {

const char *categoryOf(pl::Op op) {
  switch (op) {
  case pl::Op::F: return "forward";
  case pl::Op::B: return "backward";
  case pl::Op::BI: return "backward-input";
  case pl::Op::BW: return "weight-gradient";
  case pl::Op::SendAct: case pl::Op::SendGrad: return "send";
  default: return "recv";
  }
}

} // namespace

void PipelineRun::loadSchedule() {
  pipe = sharded.pipeline();
  if (!pipe.present || !pipe.func || !pipe.axis)
    fatal("'" + o.artifact + "' is not a pipelined program (build it with "
          "par-pipeline-split and par-pipeline-schedule)");
  func = pipe.func;
  axisName = pipe.axis;
  // The programs, verified again here (the manifest may be hand-edited).
  shape.p = pipe.p;
  shape.m = pipe.m;
  shape.v = pipe.v;
  // What the schedule kind implies (ZB-V's placement in a V), then the
  // manifest's own word on the backward.
  pl::ScheduleKind kind;
  if (pipe.schedule && pl::parseScheduleKind(pipe.schedule, kind))
    pl::applyScheduleKind(kind, shape);
  shape.splitBackward = pipe.backward && std::string(pipe.backward) == "split";
  if (pipe.num_programs != pipe.p || pipe.num_stages != pipe.p * pipe.v)
    fatal("manifest: the pipeline has " + std::to_string(pipe.num_programs) +
          " programs and " + std::to_string(pipe.num_stages) +
          " stages for p=" + std::to_string(pipe.p) +
          " v=" + std::to_string(pipe.v));
  for (int64_t r = 0; r < pipe.num_programs; ++r) {
    programs.emplace_back();
    const par_pipeline_program_t &prog = pipe.programs[r];
    for (int64_t i = 0; i < prog.num_actions; ++i) {
      const par_pipeline_action_t &a = prog.actions[i];
      programs.back().push_back({static_cast<pl::Op>(a.op), (int)a.mb,
                                 (int)a.stage, (int)a.peer});
    }
  }
  pl::VerifyResult verified = pl::verifyPrograms(shape, programs, pl::Costs());
  if (!verified.ok)
    fatal("the pipeline programs would not run: " + verified.errors.front());
  // The stored programs hold under rendezvous send/recv. A CPU program's
  // sends block less (MPI_Isend; a send first completes the ones in
  // flight), and its receives start where the programs list them
  // (MPI_Irecv) and complete where the tensor is read: a blocking receive
  // at the planned arrival would hold up the computes after it whenever
  // the real costs are not the planned ones (ZB-H1's first stage, whose BI
  // is empty, otherwise waits for each gradient before its next forward;
  // ZB-V's ranks for the chunk transfers). The programs must complete so
  // (Transfers::Posted models it; every generated one does), else the
  // receives block, moved to their readers where that completes
  // (Transfers::Buffered), else in the stored order.
  if (!onDevice()) {
    pl::RuntimePrograms run =
        pl::cpuRuntimePrograms(shape, programs, pl::Costs());
    programs = run.programs;
    postedReceives = run.posted;
  }
  S = shape.numStages();
  m = pipe.m;
}

/// The unpipelined train step of the same computation (par-optimizer's).
std::string PipelineRun::stepName() const {
  if (!pipe.step)
    fatal("manifest: the pipeline of '" + func + "' records no train step "
          "(run par-optimizer before par-pipeline-schedule)");
  return pipe.step;
}

void PipelineRun::loadStages() {
  stages.resize(S);
  // Each stage's functions by their role in the stage table.
  auto role = [&](int64_t s, const char *name, const char *what) {
    if (!name)
      fatal("manifest: pipeline stage " + std::to_string(s) + " records no " +
            what + " function (run par-autodiff and par-optimizer before "
            "par-pipeline-schedule)");
    return sharded.lookup(name);
  };
  for (int64_t s = 0; s < S; ++s) {
    const par_pipeline_stage_t &st = pipe.stages[s];
    stages[s].fwd = role(s, st.forward, "forward");
    stages[s].grad = role(s, st.backward, "backward");
    stages[s].update = role(s, st.update, "update");
    if (shape.splitBackward) {
      if (s > 0)
        stages[s].gradInput = role(s, st.input_grad, "input-gradient");
      stages[s].gradWeight = role(s, st.weight_grad, "weight-gradient");
    }
    // The backward split at its residuals (and, for ZB-H1, into halves on
    // them): F keeps the residuals, B (or BI and BW) reads them.
    bool halves = st.stash_weight_grad && (s == 0 || st.stash_input_grad);
    if (st.stash_forward && st.stash_backward &&
        (!shape.splitBackward || halves)) {
      stages[s].fwdRes = sharded.lookup(st.stash_forward);
      stages[s].bwd = sharded.lookup(st.stash_backward);
      if (shape.splitBackward) {
        if (s > 0)
          stages[s].bwdInput = sharded.lookup(st.stash_input_grad);
        stages[s].bwdWeight = sharded.lookup(st.stash_weight_grad);
      }
      stages[s].stash = true;
    }
  }
  for (int64_t s = 0; s < S; ++s)
    checkStage(s);
  const Function &f0 = stages[0].fwd;
  if (f0.devices() != world)
    fatal("the pipelined program's mesh has " + std::to_string(f0.devices()) +
          " devices but the job has " + std::to_string(world) + " ranks");
  ppAxis = f0.axisIndex(axisName);
  if (ppAxis < 0 || f0.axisSizes[ppAxis] != pipe.p)
    fatal("the mesh has no '" + axisName + "' axis of size " +
          std::to_string(pipe.p));
  coords = f0.coords(rank);
  me = coords[ppAxis];
  for (int s : shape.stagesOf((int)me))
    myStages.push_back(s);
  axesCode = ppAxis + 1;
  std::vector<int64_t> last(coords.size(), 0);
  last[ppAxis] = shape.rankOf(S - 1);
  lossRoot = f0.rankOf(last);
}

/// Checks that stage s's functions have the arguments and results the
/// interpreter uses (a hand-edited manifest may lack them).
void PipelineRun::checkStage(int64_t s) const {
  const StageProgram &st = stages[s];
  size_t P = st.update.stageArgs.size(), in = s > 0 ? 1 : 0;
  auto need = [&](const Function &fn, size_t inputs, size_t outputs) {
    if (fn.inputs.size() < inputs || fn.outputs.size() < outputs)
      fatal("manifest: '" + fn.name + "' has too few arguments or results "
            "for pipeline stage " + std::to_string(s));
  };
  need(st.fwd, std::max<size_t>(1, st.fwd.stageArgs.size() + in), 1);
  if (s == 0 && st.fwd.inputs[0].global.empty())
    fatal("manifest: arg0 of '" + st.fwd.name + "' has no batch dimension");
  need(st.grad, st.fwd.stageArgs.size() + in, 1 + P + in);
  need(st.update, 2 * P, P);
  size_t R = st.numResiduals();
  if (st.stash) {
    need(st.fwdRes, st.fwd.stageArgs.size() + in, 1);
    need(st.bwd, st.fwd.stageArgs.size() + in + R, 1 + P + in);
  }
  if (shape.splitBackward) {
    if (s > 0)
      need(st.inputGradFn(), st.fwd.stageArgs.size() + in, 2);
    need(st.weightGradFn(), st.fwd.stageArgs.size() + in, 1 + P);
  }
  if (st.update.outputs.size() < st.update.inputs.size() - P)
    fatal("manifest: '" + st.update.name + "' has too few results for "
          "pipeline stage " + std::to_string(s));
  // What the runner moves between functions by bytes must have one local
  // layout on both sides: each gradient and its sum (the update's
  // argument), the input's gradient and the previous stage's dy.
  // `x` (a's result or argument ai) and b's argument bi.
  auto sameAs = [&](const Function &a, bool result, size_t ai,
                    const Function &b, size_t bi) {
    const Tensor &x = result ? a.outputs[ai] : a.inputs[ai],
                 &y = b.inputs[bi];
    if (x.sameLayout(y))
      return;
    // e.g. "f32 [48 over tp, 64]".
    auto layout = [&](const Tensor &t) {
      std::string out = t.dtypeName + " [";
      for (size_t d = 0; d < t.local.size(); ++d) {
        out += (d ? ", " : "") + std::to_string(t.local[d]);
        for (size_t k = 0; k < t.dims[d].size(); ++k)
          out += (k ? "," : " over ") + a.axisNames[t.dims[d][k]];
      }
      out += "]";
      for (size_t k = 0; k < t.partial.size(); ++k)
        out += (k ? "," : " partial over ") + a.axisNames[t.partial[k]];
      return out;
    };
    fatal("manifest: " + std::string(result ? "result " : "argument ") +
          std::to_string(ai) + " of '" + a.name +
          "' (local " + layout(x) + ") and argument " + std::to_string(bi) +
          " of '" + b.name + "' (local " + layout(y) + ") differ in local "
          "layout (element type, local shape, split or partial axes), but "
          "the runner passes one to the other");
  };
  auto same = [&](const Function &a, size_t ai, const Function &b,
                  size_t bi) { sameAs(a, true, ai, b, bi); };
  // Every function of the stage takes the parameter buffers the update
  // keeps (zero=3: split like their state).
  for (size_t j = 0; j < P; ++j) {
    auto it = std::find(st.fwd.stageArgs.begin(), st.fwd.stageArgs.end(),
                        st.update.stageArgs[j]);
    if (it == st.fwd.stageArgs.end())
      continue; // initStage names it
    size_t a = it - st.fwd.stageArgs.begin();
    for (const Function *fn :
         {&st.fwd, &st.grad, &st.fwdRes, &st.bwd, &st.gradInput,
          &st.gradWeight, &st.bwdInput, &st.bwdWeight})
      if (!fn->name.empty() && a < fn->inputs.size())
        sameAs(st.update, false, j, *fn, a);
  }
  for (size_t j = 0; j < P; ++j) {
    same(st.backwardFn(), 1 + j, st.update, P + j);
    if (shape.splitBackward)
      same(st.weightGradFn(), 1 + j, st.update, P + j);
  }
  // A residual goes from fwdRes's results to bwd's arguments (and BI's and
  // BW's); what BI saves from its results after dx to BW's arguments after
  // the residuals.
  size_t rbase = st.fwd.stageArgs.size() + in;
  for (size_t i = 0; i < R; ++i) {
    same(st.fwdRes, 1 + i, st.bwd, rbase + i);
    if (st.stash && shape.splitBackward) {
      if (s > 0)
        same(st.fwdRes, 1 + i, st.bwdInput, rbase + i);
      same(st.fwdRes, 1 + i, st.bwdWeight, rbase + i);
    }
  }
  if (st.stash && shape.splitBackward && s > 0) {
    size_t saved = st.bwdInput.outputs.size() - 2;
    need(st.bwdWeight, rbase + R + saved, 1 + P);
    for (size_t i = 0; i < saved; ++i)
      same(st.bwdInput, 2 + i, st.bwdWeight, rbase + R + i);
  }
  if (s > 0) {
    const StageProgram &ps = stages[s - 1];
    const Function &prev = ps.backwardFn();
    size_t dy =
        ps.fwd.stageArgs.size() + (s > 1 ? 1 : 0) + ps.numResiduals();
    if (prev.inputs.size() > dy)
      same(st.backwardFn(), 1 + P, prev, dy);
    if (shape.splitBackward)
      same(st.inputGradFn(), 1, prev, dy);
  }
}

/// Ranks run different stages from here on, but communicators are made
/// collectively over the world: make every one a stage may use (each
/// ordered list of the other axes) and the pipeline axis's now.
void PipelineRun::prepareCommunicators() {
  std::vector<int64_t> others;
  for (int64_t a = 0; a < (int64_t)coords.size(); ++a)
    if (a != ppAxis)
      others.push_back(a);
  std::vector<int64_t> codes{ppAxis + 1};
  std::function<void(int64_t, int64_t, uint64_t)> lists =
      [&](int64_t code, int64_t depth, uint64_t used) {
        for (size_t i = 0; i < others.size(); ++i)
          if (!(used >> i & 1)) {
            int64_t c = code | (others[i] + 1) << (8 * depth);
            codes.push_back(c);
            lists(c, depth + 1, used | 1ull << i);
          }
      };
  lists(0, 0, 0);
  for (int64_t c : codes)
    checkRuntime(par_rt_context_prepare_axes(ctx, c), ctx,
                 "preparing the communicators");
}

/// Parameters (as the unpipelined step's arguments of the same index) and
/// optimizer state of stage `s`, which this rank runs.
void PipelineRun::initStage(int64_t s) {
  StageProgram &st = stages[s];
  const Function &u = st.update;
  size_t P = u.stageArgs.size();
  for (size_t j = 0; j < P; ++j) {
    int64_t orig = u.stageArgs[j];
    auto it = std::find(st.fwd.stageArgs.begin(), st.fwd.stageArgs.end(), orig);
    if (it == st.fwd.stageArgs.end())
      fatal("manifest: parameter arg" + std::to_string(orig) + " of stage " +
            std::to_string(s) + " is not an argument of its forward");
    st.paramArgs.push_back(it - st.fwd.stageArgs.begin());
    auto w = loaded.find(orig);
    st.params[orig] = u.upload(
        PAR_INPUT, j,
        u.scatter(PAR_INPUT, j,
                  w != loaded.end()
                      ? w->second
                      : generateGlobal(u.inputs[j], plan.seed, orig)));
  }
  for (size_t i = 2 * P; i < u.inputs.size(); ++i)
    st.state.push_back(u.upload(
        PAR_INPUT, i,
        u.scatter(PAR_INPUT, i, generateGlobal(u.inputs[i], plan.seed, 0))));
  for (size_t j = 0; j < P; ++j) {
    if (onDevice())
      st.gradSum.push_back(zeroBuffer(u.inputs[P + j].localBytes()));
    st.gradSumBuf.push_back(u.buffer(PAR_INPUT, P + j));
  }
  for (size_t k = 0; k < u.outputs.size(); ++k)
    st.updateOut.push_back(donates() && u.donatedArg(k)
                               ? SessionBuffer()
                               : u.buffer(PAR_OUTPUT, k));
}

/// Where the update of stage `st` writes result k: its donated argument's
/// buffer (a parameter or state; the sums are not donated), or its own.
SessionBuffer *PipelineRun::updateResult(StageProgram &st, size_t k) {
  const Function &u = st.update;
  size_t P = u.stageArgs.size();
  if (std::optional<size_t> a = donates() ? u.donatedArg(k) : std::nullopt) {
    if (*a < P && *a == k)
      return &st.params[u.stageArgs[*a]];
    if (*a >= 2 * P && *a - 2 * P < st.state.size() && *a - P == k)
      return &st.state[*a - 2 * P];
    fatal("manifest: '" + u.name + "' donates result" + std::to_string(k) +
          " to arg" + std::to_string(*a) + ", which result" +
          std::to_string(k) + " does not replace");
  }
  return &st.updateOut[k];
}

void PipelineRun::printHeader() {
  if (rank != 0)
    return;
  const Function &f0 = stages[0].fwd;
  // The batch comes from the data: the token input (parameters come first
  // in an imported model's stage functions), else an integer input, else
  // the first one.
  const Tensor *data = nullptr;
  for (const Tensor &t : f0.inputs)
    if (t.role == "tokens" && !data)
      data = &t;
  for (const Tensor &t : f0.inputs)
    if (!t.isFloat && !data)
      data = &t;
  const Tensor &tok = data ? *data : f0.inputs[0];
  int64_t dp = 1;
  for (size_t a = 0; a < f0.axisSizes.size(); ++a)
    for (const std::vector<int64_t> &axes : tok.dims)
      if (std::find(axes.begin(), axes.end(), (int64_t)a) != axes.end())
        dp *= f0.axisSizes[a];
  printf("%s: pipeline %s: %lld stages on %lld ranks of '%s' (%s, "
         "v=%lld), %lld micro-batches; global batch %lld = micro-batch "
         "%lld x %lld micro-batches x %lld data-parallel\n",
         toolName().c_str(), func.c_str(), (long long)S, (long long)pipe.p,
         axisName.c_str(), pipe.schedule ? pipe.schedule : "?",
         (long long)pipe.v, (long long)m, (long long)(tok.global[0] * m),
         (long long)(tok.global[0] / dp), (long long)m, (long long)dp);
}

/// Data argument j (the split function's `orig`) of stage s's function fs
/// for micro-batch mb of step `step`.
Buffer PipelineRun::dataArg(const Function &fs, size_t j, int64_t orig,
                            int64_t s, int64_t step, int64_t mb) {
  const Tensor &t = fs.inputs[j];
  if (t.role == ::par::manifest::key::kRoleLossScale) {
    // The loss scale the backward is seeded with: the train state's.
    if (!scaling || t.globalCount != 1)
      fatal("stage " + std::to_string(s) + " takes the loss scale (arg" +
            std::to_string(orig) + "), but the stage updates carry no scale "
            "state");
    Buffer g = zeroBuffer(t.globalBytes());
    par_dtype_store(t.dtype, g.data(), 0, stepScale);
    return fs.scatter(PAR_INPUT, j, g);
  }
  if (o.data.empty()) {
    // Row r of micro-batch mb is row r * m + mb of the step's argument.
    if ((size_t)orig >= stepSpec.inputs.size() || t.global.empty() ||
        stepSpec.inputs[orig].global[0] != t.global[0] * m)
      fatal("stage " + std::to_string(s) + "'s arg" + std::to_string(orig) +
            " is not an m-fold argument of '" + stepSpec.name + "'");
    int64_t row = t.globalCount / t.global[0];
    int64_t mm = m;
    auto given = o.inputs.find("arg" + std::to_string(orig));
    if (given != o.inputs.end()) {
      // --input argK=FILE.npy: the step's whole argument (m micro-batches),
      // read once; micro-batch mb takes the same rows as generated data.
      auto cached = fixedData.find(orig);
      if (cached == fixedData.end())
        cached = fixedData
                     .emplace(orig, readNpy(given->second, stepSpec.inputs[orig],
                                            inputLabel(stepSpec.inputs,
                                                       (size_t)orig)))
                     .first;
      size_t elt = t.globalBytes() / (size_t)t.globalCount;
      Buffer g = zeroBuffer(t.globalBytes());
      for (int64_t r = 0; r < t.global[0]; ++r)
        std::memcpy(g.data() + (size_t)(r * row) * elt,
                    cached->second.data() + (size_t)((r * mm + mb) * row) * elt,
                    (size_t)row * elt);
      return fs.scatter(PAR_INPUT, j, g);
    }
    Buffer g = generateGlobal(t, plan.seed, orig, &stepSpec.inputs[orig],
                              [&](int64_t i) {
                                return ((i / row) * mm + mb) * row + i % row;
                              });
    return fs.scatter(PAR_INPUT, j, g);
  }
  if ((orig != plan.tokensArg && orig != plan.targetsArg) || t.dtype != PAR_I64 ||
      t.global.size() != 2)
    fatal("stage " + std::to_string(s) + " takes arg" + std::to_string(orig) +
          ", which is neither a parameter nor the tokens/targets "
          "(--tokens/--targets)");
  return fs.scatter(PAR_INPUT, j,
                    data.batch(t, orig == plan.targetsArg, step, m, mb));
}

/// The arguments of stage s's function `callee` for mb: the stage
/// arguments, x, a stashing backward's residuals and dy.
CallArgs PipelineRun::stageArgs(int64_t s, int64_t step, int64_t mb,
                                const Function &callee,
                                const SessionBuffer *x,
                                const std::vector<SessionBuffer> *residuals,
                                const SessionBuffer *dy) {
  StageProgram &st = stages[s];
  // Data arguments in the callee's layout (without a split at residuals:
  // the backward's where it has dy or runs the last stage, as before).
  const Function &fs =
      st.stash ? callee : dy || s + 1 == S ? st.grad : st.fwd;
  CallArgs args;
  for (size_t j = 0; j < st.fwd.stageArgs.size(); ++j) {
    int64_t orig = st.fwd.stageArgs[j];
    auto it = st.params.find(orig);
    if (it != st.params.end())
      args.add(&it->second);
    else
      args.add(fs.upload(PAR_INPUT, j, dataArg(fs, j, orig, s, step, mb)));
  }
  if (s > 0)
    args.add(x);
  if (residuals)
    for (const SessionBuffer &r : *residuals)
      args.add(&r);
  if (dy)
    args.add(dy);
  return args;
}

/// sum[i] += x[i] for `count` elements of `dtype`, in host memory (f32
/// and f64 by a loop the compiler vectorises; the rest by element).
static void addInto(par_dtype_t dtype, char *sum, const char *x,
                    int64_t count) {
  auto add = [&](auto zero) {
    using T = decltype(zero);
    T *s = reinterpret_cast<T *>(sum);
    const T *v = reinterpret_cast<const T *>(x);
    for (int64_t i = 0; i < count; ++i)
      s[i] += v[i];
  };
  if (dtype == PAR_F32)
    return add(0.0f);
  if (dtype == PAR_F64)
    return add(0.0);
  for (int64_t i = 0; i < count; ++i)
    par_dtype_store(dtype, sum, i,
                    par_dtype_load(dtype, sum, i) + par_dtype_load(dtype, x, i));
}

/// Stage `st`'s sum of parameter j's gradients where the host adds them:
/// the update's own buffer for a CPU program, a host copy for a GPU one.
char *PipelineRun::gradSumData(StageProgram &st, size_t j) const {
  return onDevice() ? st.gradSum[j].data()
                    : static_cast<char *>(st.gradSumBuf[j].data());
}

/// Adds the parameter gradients (results 1..P of `fn`) to the sums: in
/// place for a CPU program, through the host for a GPU one (a round trip
/// per backward: see the file comment). The step's first backward copies.
void PipelineRun::accumulate(StageProgram &st, const Function &fn,
                             const std::vector<SessionBuffer> &outs) {
  for (size_t j = 0; j < st.paramArgs.size(); ++j) {
    const Tensor &t = fn.outputs[1 + j];
    Buffer host;
    const char *g;
    if (onDevice()) {
      host = outs[1 + j].download();
      g = host.data();
    } else {
      g = static_cast<const char *>(outs[1 + j].data());
    }
    if (st.summed)
      addInto(t.dtype, gradSumData(st, j), g, t.localCount);
    else
      std::memcpy(gradSumData(st, j), g, t.localBytes());
  }
  st.summed = true;
}

/// Stage a.stage's function `c` on x (the stage input; none for stage 0)
/// and dy (the output gradient; null for the last stage), for a.mb of the
/// current step.
std::vector<SessionBuffer>
PipelineRun::call(StageCall c, const pl::Action &a, const SessionBuffer *x,
                  const SessionBuffer *dy,
                  const std::vector<SessionBuffer> *residuals) {
  StageProgram &st = stages[a.stage];
  const Function &fn = c == StageCall::Forward    ? st.forwardFn()
                       : c == StageCall::Backward ? st.backwardFn()
                       : c == StageCall::InputGrad ? st.inputGradFn()
                                                   : st.weightGradFn();
  return fn.callBuffers(
      stageArgs(a.stage, currentStep, a.mb, fn, x, residuals, dy).ptrs);
}

void PipelineRun::loss(const SessionBuffer &out) {
  lossSum += out.scalar(stages[S - 1].fwd.outputs[0].dtype);
}

void PipelineRun::accumulate(StageCall c, int64_t stage,
                             const std::vector<SessionBuffer> &outs) {
  StageProgram &st = stages[stage];
  accumulate(st, c == StageCall::WeightGrad ? st.weightGradFn()
                                            : st.backwardFn(),
             outs);
}

/// act(mb, s) is stage s's input; grad(mb, s) its gradient: both have the
/// layout of stage s's input argument, and are received in place (device
/// memory for a GPU program).
SessionBuffer PipelineRun::receive(const pl::Action &a) {
  const Function &f = stages[a.stage].fwd;
  const Tensor &t = f.inputs.back();
  SessionBuffer buf = f.buffer(PAR_INPUT, f.inputs.size() - 1);
  int64_t tag = a.op == pl::Op::RecvAct ? 0 : 1;
  if (!postedReceives) {
    par_rt_k_recv((int64_t)(intptr_t)buf.data(), t.localCount, t.dtype,
                  axesCode, a.peer, tag);
    return buf;
  }
  int64_t request = -1;
  checkRuntime(par_rt_recv_start(ctx, buf.data(), t.localCount, t.dtype,
                                 axesCode, a.peer, tag, &request),
               ctx, "starting " + pl::formatAction(a));
  startedReceives[buf.data()] = request;
  return buf;
}

void PipelineRun::ready(const SessionBuffer &b) {
  auto it = startedReceives.find(b.data());
  if (it == startedReceives.end())
    return;
  int64_t request = it->second;
  startedReceives.erase(it);
  checkRuntime(par_rt_recv_wait(ctx, request), ctx,
               "completing a receive");
}

void PipelineRun::send(const pl::Action &a, const SessionBuffer &b) {
  const Tensor &t = stages[a.stage].fwd.inputs.back();
  checkRuntime(par_rt_send_async(ctx, b.data(), t.localCount, t.dtype,
                                 axesCode, a.peer,
                                 a.op == pl::Op::SendAct ? 0 : 1),
               ctx, "sending " + pl::formatAction(a));
}

void PipelineRun::waitSends() {
  checkRuntime(par_rt_wait_sends(ctx), ctx, "completing sends");
}

/// Parameters that several stages take (an LM head tied to the token
/// embedding, in the first and the last stage): each stage holds a copy and
/// computes its part of the gradient. Before the updates every copy gets
/// the sum of all parts, over the pipeline axis (Megatron's embedding-group
/// all-reduce), so the copies take identical updates and stay equal. Every
/// rank of the axis joins each sum (zeros where it holds no copy), in one
/// order. The copies must have one local layout (the same sharding).
void PipelineRun::sumTiedGradients() {
  if (!tiedChecked) {
    std::map<int64_t, std::vector<std::pair<int64_t, size_t>>> users;
    for (int64_t s = 0; s < S; ++s)
      for (size_t j = 0; j < stages[s].update.stageArgs.size(); ++j)
        users[stages[s].update.stageArgs[j]].push_back({s, j});
    for (auto &[orig, us] : users) {
      if (us.size() < 2)
        continue;
      const Function &u0 = stages[us[0].first].update;
      size_t P0 = u0.stageArgs.size();
      const Tensor &g0 = u0.inputs[P0 + us[0].second];
      for (auto [s, j] : us) {
        const Function &u = stages[s].update;
        const Tensor &g = u.inputs[u.stageArgs.size() + j];
        if (g.localCount != g0.localCount || g.dtype != g0.dtype ||
            g.local != g0.local)
          fatal("pipeline: parameter " + inputLabel(u.inputs, j) +
                " is used by stages " + std::to_string(us[0].first) + " and " +
                std::to_string(s) + " with different local layouts; a tied "
                "parameter needs one sharding in every stage");
      }
      tied.push_back({orig, us});
    }
    tiedChecked = true;
  }
  for (auto &[orig, us] : tied) {
    const Function &u0 = stages[us[0].first].update;
    const Tensor &g0 = u0.inputs[u0.stageArgs.size() + us[0].second];
    size_t bytes = g0.localBytes();
    Buffer mine = zeroBuffer(bytes), total = zeroBuffer(bytes);
    for (auto [s, j] : us)
      if (shape.rankOf(s) == me)
        addInto(g0.dtype, mine.data(), gradSumData(stages[s], j),
                g0.localCount);
    par_rt_k_all_reduce((int64_t)(intptr_t)mine.data(),
                        (int64_t)(intptr_t)total.data(), g0.localCount,
                        g0.dtype, PAR_SUM, axesCode);
    for (auto [s, j] : us)
      if (shape.rankOf(s) == me)
        std::memcpy(gradSumData(stages[s], j), total.data(), bytes);
  }
}

/// The optimizer: each stage's update on its summed gradients.
void PipelineRun::runUpdates() {
  sumTiedGradients();
  for (int64_t s : myStages) {
    StageProgram &st = stages[s];
    size_t P = st.paramArgs.size();
    // The gradient sums go in (for a GPU program, one upload per step and
    // parameter).
    std::vector<const SessionBuffer *> args;
    for (int64_t orig : st.update.stageArgs)
      args.push_back(&st.params[orig]);
    for (size_t j = 0; j < P; ++j) {
      if (!st.summed)
        std::memset(gradSumData(st, j), 0,
                    st.update.inputs[P + j].localBytes());
      if (onDevice())
        st.gradSumBuf[j].upload(st.gradSum[j].data(),
                                st.update.inputs[P + j].localBytes());
      args.push_back(&st.gradSumBuf[j]);
    }
    st.summed = false;
    for (const SessionBuffer &x : st.state)
      args.push_back(&x);
    std::vector<SessionBuffer *> outs;
    for (size_t k = 0; k < st.updateOut.size(); ++k)
      outs.push_back(updateResult(st, k));
    st.update.callBuffers(args, outs);
    if (scaling && s == myStages.front()) {
      const Function &u = st.update;
      lastTaken = outs[u.finiteResult]->scalar(
                      u.outputs[u.finiteResult].dtype) > 0.5;
      nextScale = outs[u.lossScaleResult]->scalar(
          u.outputs[u.lossScaleResult].dtype);
    }
    // The new parameters and state replace the old by a swap (donated
    // ones are in place already).
    for (size_t j = 0; j < P; ++j) {
      if (outs[j] != &st.params[st.update.stageArgs[j]])
        std::swap(st.params[st.update.stageArgs[j]], st.updateOut[j]);
    }
    for (size_t k = 0; k < st.state.size(); ++k)
      if (outs[P + k] != &st.state[k])
        std::swap(st.state[k], st.updateOut[P + k]);
  }
}

/// The new parameters and state of this rank's stages (Finite.h): a
/// parameter is named and ordered by its unpipelined step's argument,
/// optimizer state after all parameters, by stage.
std::vector<UpdatedTensor> PipelineRun::updatedState() const {
  std::vector<UpdatedTensor> state;
  bool device = sharded.target() != "cpu";
  for (int64_t s : myStages) {
    const StageProgram &st = stages[s];
    const Function &u = st.update;
    size_t P = st.paramArgs.size();
    for (size_t j = 0; j < P; ++j) {
      int64_t orig = u.stageArgs[j];
      std::string name = u.inputs[j].name;
      state.push_back({orig,
                       "arg" + std::to_string(orig) +
                           (name.empty() ? "" : " (" + name + ")"),
                       &u.inputs[j], &st.params.at(orig), device});
    }
    for (size_t k = 0; k < st.state.size(); ++k)
      state.push_back({(int64_t(1) << 40) + (s << 20) + int64_t(k),
                       "state " + inputLabel(u.inputs, 2 * P + k) + " of '" +
                           u.name + "' (stage " + std::to_string(s) + ")",
                       &u.inputs[2 * P + k], &st.state[k], device});
  }
  return state;
}

/// --nonfinite skip: the previous parameters and state back (runUpdates'
/// swaps undone; the update's results hold them).
void PipelineRun::undoUpdates() {
  if (donates())
    fatal("internal: undoing an update made in place");
  for (int64_t s : myStages) {
    StageProgram &st = stages[s];
    size_t P = st.paramArgs.size();
    for (size_t j = 0; j < P; ++j)
      std::swap(st.params[st.update.stageArgs[j]], st.updateOut[j]);
    for (size_t k = 0; k < st.state.size(); ++k)
      std::swap(st.state[k], st.updateOut[P + k]);
  }
}

/// The loss scale this step runs with (this rank's first stage's state).
double PipelineRun::lossScale() const {
  const StageProgram &st = stages[myStages.front()];
  size_t k = st.update.lossScaleResult - st.paramArgs.size();
  return st.state[k].scalar(
      st.update.inputs[2 * st.paramArgs.size() + k].dtype);
}


StepOutcome PipelineRun::step(int64_t step) {
  lossSum = 0;
  currentStep = step;
  // Loss scaling: the scale the backward is seeded with and the log shows
  // (the state changes only in the update, at the end of the step).
  stepScale = scaling ? lossScale() : NAN;
  bool tracing = !o.trace.empty() && step == o.train.steps;
  if (tracing)
    par_rt_trace_enable(ctx, 1);
  double t0 = par_rt_now_seconds();
  for (const pl::Action &a : programs[me]) {
    buffers->awaitInputs(a); // a started receive's wait is its own
    double e0 = par_rt_now_seconds();
    buffers->run(a);
    if (tracing) {
      pl::Action named = a;
      named.peer = -1; // trace names carry no peer
      trace.add(pl::formatAction(named), categoryOf(a.op), e0 - t0,
                par_rt_now_seconds() - t0);
      trace.addKernels(ctx, t0);
    }
  }
  buffers->finishStep();
  double u0 = par_rt_now_seconds();
  runUpdates();
  if (tracing) {
    trace.add("optimizer update", "update", u0 - t0, par_rt_now_seconds() - t0);
    // The update's collectives (the data-parallel gradient buckets).
    trace.addKernels(ctx, t0);
  }
  StepOutcome r;
  r.loss = lossSum / m;
  checkRuntime(par_rt_broadcast_world(ctx, &r.loss, sizeof(r.loss), lossRoot),
               ctx, "broadcasting the loss");
  r.seconds = par_rt_now_seconds() - t0;
  r.scale = stepScale;
  r.taken = lastTaken;
  return r;
}
void PipelineRun::prepare() {
  loadSchedule();
  loadStages();
  prepareCommunicators();
  data.seed = plan.seed;
  if (!o.data.empty())
    data.load(o.data);
  else
    stepSpec = sharded.lookup(stepName());
  loadStageWeights();
  for (int64_t s : myStages)
    initStage(s);
  buffers.emplace(*this, S);
  if (!o.checkpoint.dir.empty() || !o.resume.empty() || o.verify)
    findStateKeys();
  const Function &u0 = stages[myStages.front()].update;
  scaling = u0.lossScaleResult >= 0 && u0.finiteResult >= 0;
  for (int64_t s = 0; s < S; ++s)
    if ((stages[s].update.lossScaleResult >= 0) != scaling)
      fatal("manifest: some pipeline stage updates carry a loss scale and "
            "others do not");
  if (scaling && pipe.v > 1)
    fatal("loss scaling with interleaved stages (v > 1) is not supported: "
          "each rank's updates would decide on part of the stages only");
}

LossScaling PipelineRun::lossScaling() const {
  return {scaling, stages[myStages.front()].update.minLossScale};
}

double PipelineRun::tokensPerStep() const {
  return o.data.empty() ? -1.0
                        : double(stages[0].fwd.inputs[0].globalCount * m);
}

std::string PipelineRun::title() const {
  return toolName() + ": " + func + " pipelined on " + std::to_string(world) +
         " ranks, loss per step";
}
} // namespace pipeline_run

int runPipeline(par_rt_context_t *ctx, const RunPlan &plan) {
  pipeline_run::PipelineRun run(ctx, plan);
  return runTraining(ctx, plan, run);
}

} // namespace par::tooling


//===- CostModel.cpp - Price a configuration -------------------------------===//
//
// docs/Planning.md states the model and what it ignores.
//
//===----------------------------------------------------------------------===//

#include "par/Planning/CostModel.h"
#include "par/Planning/Machine.h"
#include "par/Planning/ModelProfile.h"
#include "par/Pipelining/Schedule.h"

#include <algorithm>
#include <cmath>

using namespace mlir::par::planning;
namespace pl = ::par::pipeline;

double mlir::par::planning::collectiveSeconds(const std::string &kind,
                                              double fullBytes, int64_t n,
                                              double bandwidth,
                                              double latency) {
  if (n <= 1 || fullBytes <= 0)
    return 0;
  double share = static_cast<double>(n - 1) / static_cast<double>(n);
  if (kind == "all_reduce")
    return 2 * share * fullBytes / bandwidth + 2 * (n - 1) * latency;
  return share * fullBytes / bandwidth + (n - 1) * latency;
}

namespace {
/// Timetables with more actions than this are priced by the closed forms
/// of docs/RationalePipeline.md instead (the search stays fast).
constexpr double kMaxSimulatedActions = 40000;

/// Bytes each gradient bucket holds (par-bucket-reductions' default, DDP's).
constexpr double kBucketBytes = 25.0 * 1024 * 1024;

struct Link {
  double bandwidth, latency;
};

/// Ranks are laid out tp innermost, then dp, then pp (Megatron's order): a
/// group of `size` ranks `stride` apart stays in a node when it spans no
/// more than a node's devices.
Link linkFor(const Machine &machine, int64_t stride, int64_t size) {
  if (stride * size <= machine.devicesPerNode)
    return {machine.node.bandwidth, machine.node.latency};
  return {machine.network.bandwidth, machine.network.latency};
}

struct Pipeline {
  double makespan = 0;
  int inFlight = 1;
};

/// The pipeline's makespan for chunk costs f, b and transfer `comm`, from
/// par's timetable (or, beyond kMaxSimulatedActions, the closed forms).
Pipeline pipelineTime(const Configuration &c, const Machine &machine,
                      double f, double b, double bi, double bw, double comm) {
  Pipeline out;
  if (c.pp == 1) {
    out.makespan = static_cast<double>(c.m) * (f + b);
    return out;
  }
  pl::ScheduleConfig sc;
  pl::parseScheduleKind(c.schedule, sc.kind);
  sc.shape.p = static_cast<int>(c.pp);
  sc.shape.m = static_cast<int>(c.m);
  sc.shape.v = static_cast<int>(c.v);
  sc.costs.f = f;
  sc.costs.b = b;
  sc.costs.bi = bi;
  sc.costs.bw = bw;
  sc.costs.comm = comm;
  double actions = 2.0 * c.m * c.pp * c.v;
  std::string error;
  pl::Timetable table;
  if (actions <= kMaxSimulatedActions && pl::validateConfig(sc).empty() &&
      pl::buildTimetable(sc, table, error)) {
    pl::Metrics metrics = pl::computeMetrics(table);
    out.makespan = metrics.makespan;
    // Ranks that share processors (Machine::sharedProcessors: cpu-local's
    // 8 ranks on 2 cores): the action costs are at the rates measured with
    // every rank of the node busy (P/N of a processor each); while k ranks
    // compute, each gets min(1, P/k), so a rank runs faster while others
    // wait (their MPI waits yield). Each pipeline rank stands for its
    // dp x tp ranks, which run the same actions.
    double P = machine.sharedProcessors;
    if (P > 0 && c.devices() <= machine.devicesPerNode) {
      double group = static_cast<double>(c.dp * c.tp);
      double measured = P / machine.devicesPerNode;
      double shared = pl::simulateShared(table, [&](int busy) {
        return std::min(1.0, P / (busy * group)) / measured;
      });
      if (shared > 0)
        out.makespan = shared;
    }
    out.inFlight = metrics.peakActivations.empty()
                       ? 1
                       : *std::max_element(metrics.peakActivations.begin(),
                                           metrics.peakActivations.end());
    return out;
  }
  // Closed forms (ANCHORS.md's table): ideal m*v*(f+b) per rank plus the
  // bubble, transfers on the fill and drain.
  double p = static_cast<double>(c.pp), m = static_cast<double>(c.m),
         v = static_cast<double>(c.v);
  bool split = c.splitBackward();
  double ideal = m * v * (f + (split ? bi + bw : b));
  double bubble = (p - 1) * (f + b);
  int inFlight = static_cast<int>(c.pp);
  if (c.schedule == "gpipe")
    inFlight = static_cast<int>(c.m);
  else if (split)
    bubble = (p - 1) * (f + bi - bw);
  else if (c.schedule == "interleaved")
    inFlight = static_cast<int>(c.pp * c.v + c.pp - 1);
  out.makespan = ideal + bubble + 2 * (p - 1) * comm;
  out.inFlight = inFlight;
  return out;
}
} // namespace

namespace {
/// One kernel for one micro-batch of `b` samples on one device.
KernelTime priceKernel(const KernelCost &k, const DeviceSpec &dev,
                       const Configuration &c, double b, double scale,
                       double peak) {
  double t = static_cast<double>(c.tp);
  double n = k.perSample ? b : 1;
  double split = (k.tpSplit || (c.sequenceParallel && k.perSample)) ? t : 1;
  KernelTime r;
  r.name = k.name;
  r.gemm = k.gemm;
  r.flops = k.flops * n / split;
  r.bytes = k.bytes * n * scale / split;
  double compute = k.gemm ? r.flops / (peak * dev.gemmEfficiencyAt(r.flops))
                          : r.flops / dev.vectorFlops;
  r.seconds = std::max(compute, r.bytes / dev.memoryBandwidth) +
              dev.launchSeconds;
  return r;
}
} // namespace

std::vector<KernelTime> mlir::par::planning::kernelTimes(
    const ModelProfile &model, const Machine &machine, const Configuration &c,
    int64_t globalBatch) {
  std::vector<KernelTime> out;
  double peak = machine.device.peakFor(c.precision);
  if (peak <= 0 || c.dp * c.m <= 0)
    return out;
  double b = static_cast<double>(globalBatch / (c.dp * c.m));
  double scale = (c.precision != "f32" ? 2.0 : 4.0) /
                 static_cast<double>(model.dtypeBytes);
  for (const KernelCost &k :
       model.fusedKernels.empty() ? model.kernels : model.fusedKernels)
    out.push_back(priceKernel(k, machine.device, c, b, scale, peak));
  for (const KernelCost &k : model.gradKernels) {
    out.push_back(priceKernel(k, machine.device, c, b, scale, peak));
    out.back().backward = true;
  }
  return out;
}

bool mlir::par::planning::estimate(const ModelProfile &model,
                                   const Machine &machine,
                                   const Configuration &c,
                                   int64_t globalBatch, Estimate &out,
                                   std::string &error) {
  const DeviceSpec &dev = machine.device;
  double peak = dev.peakFor(c.precision);
  if (peak <= 0) {
    error = "machine '" + machine.name + "' has no peak for precision=" +
            c.precision;
    return false;
  }
  Estimate e;
  e.config = c;
  const double t = static_cast<double>(c.tp);
  // The busiest stage holds ceil(layers / stages) layers; its share of the
  // model sets the chunk costs (par's split balances by cost, so stages
  // differ by at most a layer).
  const int64_t stages = c.pp * c.v;
  const double chunks =
      static_cast<double>(model.layers) /
      static_cast<double>((model.layers + stages - 1) / stages);
  const int64_t bInt = globalBatch / (c.dp * c.m);
  const double b = static_cast<double>(bInt);
  e.microBatchSize = bInt;
  const bool mixed = c.precision != "f32";
  const double computeBytes = mixed ? 2 : 4;
  const double scale = computeBytes / static_cast<double>(model.dtypeBytes);

  // The forward of one micro-batch through the whole model, on one device
  // of its tp group, kernel by kernel; the same for the gradient function.
  auto kernelSeconds = [&](const KernelCost &k) {
    return priceKernel(k, dev, c, b, scale, peak).seconds;
  };
  double fwd = 0, core = 0, act = 0, coreAct = 0;
  for (const KernelCost &k : model.kernels) {
    double time = kernelSeconds(k);
    if (model.fusedKernels.empty())
      fwd += time;
    if (k.perSample) {
      double n = b;
      double split = (k.tpSplit || c.sequenceParallel) ? t : 1;
      double saved = k.resultBytes * n * scale / split;
      act += saved;
      if (k.attentionCore)
        coreAct += saved;
    }
    if (k.attentionCore)
      core += time;
  }
  for (const KernelCost &k : model.fusedKernels)
    fwd += kernelSeconds(k);
  // Every collective waits for the slowest rank (Machine::syncStretch).
  const double stretch = 1 + machine.syncStretch;
  fwd *= stretch;
  core *= stretch;
  // The backward: what par-autodiff's gradient function adds to the
  // forward, or twice the forward without one.
  double back = 2 * fwd;
  if (!model.gradFunction.empty()) {
    double grad = 0;
    for (const KernelCost &k : model.gradKernels)
      grad += kernelSeconds(k);
    back = std::max(grad * stretch - fwd, 0.0);
  }
  // Tensor-parallel collectives of the forward; the backward's are what the
  // gradient function adds (without one, the forward's again: Megatron's
  // f/g pairs); a fully recomputed forward repeats the forward's.
  Link tpLink = linkFor(machine, 1, c.tp);
  double tpF = 0;
  auto commSeconds = [&](const std::vector<TPCollective> &colls) {
    double sum = 0;
    for (const TPCollective &coll : colls)
      sum += collectiveSeconds(coll.kind, coll.fullBytes * b * scale, c.tp,
                               tpLink.bandwidth, tpLink.latency);
    return sum;
  };
  tpF = commSeconds(c.sequenceParallel ? model.spCollectives
                                       : model.tpCollectives);
  double tpB = tpF;
  if (!model.gradFunction.empty())
    tpB = std::max(0.0, commSeconds(c.sequenceParallel
                                        ? model.gradSPCollectives
                                        : model.gradTPCollectives) -
                            tpF);
  double recomputeFwd = c.recompute == "full"        ? fwd
                        : c.recompute == "selective" ? core
                                                     : 0;
  double tpR = c.recompute == "full" ? tpF : 0;

  // Per chunk (stage) and micro-batch, on the busiest pipeline rank: the
  // layers are spread (par-import pins the blocks, par's split balances
  // them), but what lies outside them stays at the ends: the embedding on
  // the first stage, the LM head and the loss on the last (Megatron's
  // placement too). Its share is that of the GEMM FLOPs: all of them less
  // `layers` times one layer's (the GEMMs from one attention softmax to
  // the next; any rotation of a layer is one), the head's GEMM being what
  // costs there (the loss's elementwise kernels priced as fused into it,
  // as Megatron's vocabulary-parallel cross-entropy is). The backward and
  // a recomputation split the same way.
  double share = 1.0 / chunks;
  if (stages > 1) {
    const std::vector<KernelCost> &ks = model.kernels;
    std::vector<size_t> softmaxes;
    double gemm = 0;
    for (size_t i = 0; i < ks.size(); ++i) {
      if (ks[i].attentionCore && ks[i].name == "linalg.softmax")
        softmaxes.push_back(i);
      if (ks[i].gemm && ks[i].perSample)
        gemm += ks[i].flops;
    }
    if (softmaxes.size() >= 2 && gemm > 0 &&
        static_cast<int64_t>(softmaxes.size()) == model.layers) {
      double layer = 0;
      for (size_t i = softmaxes[softmaxes.size() - 2]; i < softmaxes.back();
           ++i)
        if (ks[i].gemm && ks[i].perSample)
          layer += ks[i].flops;
      double rho = std::clamp(
          (gemm - static_cast<double>(model.layers) * layer) / gemm, 0.0,
          1.0);
      double perRank = static_cast<double>((model.layers + c.pp - 1) / c.pp);
      share = std::max(
          share, (perRank * (1 - rho) / static_cast<double>(model.layers) +
                  rho) /
                     static_cast<double>(c.v));
    }
  }
  // par's pipeline (docs/RationalePipeline.md, par-run --pipeline): a
  // forward keeps the residuals its backward reads (par-pipeline-stash),
  // so a backward action costs the backward (and what recompute=full or
  // selective recompute); ZB-H1's halves split it: BI the input gradients
  // (dX = dY W^T, half the backward's GEMMs, and any recomputation), BW
  // the weight gradients on what BI saved (dW = X^T dY, the other half).
  // With stash=false a forward stashes only its stage's input: every
  // backward action first recomputes the stage's forward (a stage-sized
  // full recomputation), ZB-H1's BI (half the backward) and BW (the
  // weight gradients need dY carried back through the whole stage: the
  // backward, priced whole) each.
  const bool pipelined = c.pp > 1;
  const bool zb = pipelined && c.splitBackward();
  const bool redoStage = pipelined && !c.stash;
  const double stageFwd = redoStage ? fwd : 0, stageTpF = redoStage ? tpF : 0;
  auto backwardAction = [&](double part) {
    return (stageFwd + recomputeFwd + part * back) * share +
           (stageTpF + tpR + part * tpB) / chunks;
  };
  double f = fwd * share + tpF / chunks;
  double bwd = backwardAction(1);
  double bi = zb ? backwardAction(0.5) : bwd / 2;
  double bw = zb ? backwardAction(1) : bwd / 2;
  if (zb && c.stash) {
    bi = (recomputeFwd + back / 2) * share + (tpR + tpB / 2) / chunks;
    bw = back / 2 * share + tpB / 2 / chunks;
  }
  Link ppLink = linkFor(machine, c.tp * c.dp, 2);
  double p2pBytes = model.hiddenBytes * b * scale;
  e.p2p = c.pp > 1 ? ppLink.latency + p2pBytes / ppLink.bandwidth : 0;
  Pipeline pipe = pipelineTime(c, machine, f, bwd, bi, bw, e.p2p);
  double mv = static_cast<double>(c.m * c.v);
  // Per micro-batch and chunk: one backward action, or ZB-H1's two (BI's
  // half of the backward done again in BW).
  // Stashing, ZB-H1's halves split one backward: no work done twice.
  const bool redoHalves = zb && !c.stash;
  double actions = redoHalves ? 2 : 1;
  e.forward = mv * fwd / chunks;
  e.backward = mv * back / chunks;
  e.recompute =
      mv *
      (actions * (stageFwd + recomputeFwd) + (redoHalves ? back / 2 : 0)) /
      chunks;
  e.tpComm = mv *
             (tpF + tpB + actions * (stageTpF + tpR) +
              (redoHalves ? tpB / 2 : 0)) /
             chunks;
  double busy = e.forward + e.backward + e.recompute + e.tpComm;
  // Negative only where ranks share processors: the waiting ranks' share
  // went to the busy ones.
  e.bubble = machine.sharedProcessors > 0 ? pipe.makespan - busy
                                          : std::max(0.0, pipe.makespan - busy);
  e.inFlight = pipe.inFlight;

  // Parameters on this device, their gradient reduction and update.
  double deviceParams =
      (model.params - model.tpSplitParams + model.tpSplitParams / t) /
      static_cast<double>(c.pp);
  const double dp = static_cast<double>(c.dp);
  Link dpLink = linkFor(machine, c.tp, c.dp);
  // grad-reduce=f32 (par's default), or the compute type's bytes.
  double gradBytes =
      deviceParams * (c.gradReduce == "compute" ? computeBytes : 4);
  e.dpTotal = collectiveSeconds("all_reduce", gradBytes, c.dp,
                                dpLink.bandwidth, dpLink.latency);
  // Unpipelined, the buckets start during the backward and the last
  // micro-batch's hides them; a pipelined stage's update reduces its
  // gradient sums after the last action (par-run --pipeline): exposed.
  // Where the ranks share processors (cpu-local) a collective's copies
  // and reductions take the processor the computation needs: nothing
  // overlaps.
  const bool overlaps = machine.sharedProcessors <= 0;
  double window = pipelined || !overlaps ? 0 : bwd * static_cast<double>(c.v);
  double lastBucket = collectiveSeconds(
      "all_reduce", std::min(gradBytes, kBucketBytes), c.dp, dpLink.bandwidth,
      dpLink.latency);
  e.dpExposed = e.dpTotal > 0 ? (pipelined || !overlaps ? e.dpTotal
                                           : std::max(0.0, e.dpTotal - window) +
                                                 std::min(e.dpTotal,
                                                          lastBucket))
                              : 0;
  if (c.zero >= 1 && c.dp > 1) {
    // par's ZeRO (Communication/ZeRO.h) reduce-scatters each gradient on
    // its own where the backward makes it and, below stage 3, all-gathers
    // each updated parameter after the update (f32): a collective per
    // parameter tensor each, not bucketed, none hidden.
    double tensors = std::max(
        1.0, static_cast<double>(model.paramTensors) / static_cast<double>(c.pp));
    double extra = (tensors - 1) * static_cast<double>(c.dp - 1) *
                   dpLink.latency;
    double scatter = collectiveSeconds("reduce_scatter", gradBytes, c.dp,
                                       dpLink.bandwidth, dpLink.latency) +
                     extra;
    double gather = c.zero >= 3
                        ? 0
                        : collectiveSeconds("all_gather", deviceParams * 4,
                                            c.dp, dpLink.bandwidth,
                                            dpLink.latency) +
                              extra;
    e.dpTotal = scatter + gather;
    e.dpExposed = e.dpTotal;
  }
  if (c.zero == 3 && c.dp > 1) {
    // One gather per parameter tensor, before its use in the forward and
    // again in the backward (Communication/ZeRO.h).
    double tensors = std::max(
        1.0, static_cast<double>(model.paramTensors) / static_cast<double>(c.pp));
    double gather = collectiveSeconds("all_gather", deviceParams * computeBytes,
                                      c.dp, dpLink.bandwidth, dpLink.latency) +
                    (tensors - 1) * static_cast<double>(c.dp - 1) *
                        dpLink.latency;
    double all = 2 * static_cast<double>(c.m) * gather;
    e.zeroGather = overlaps ? std::max(0.0, all - busy) + gather : all;
  }
  double updated = c.zero >= 1 ? deviceParams / dp : deviceParams;
  double updateBytes = mixed ? 30 : 28; // AdamW: w,g,m,v in; w,m,v (+copy) out
  e.optimizer = (updated * updateBytes / dev.memoryBandwidth +
                 4 * dev.launchSeconds) *
                stretch;
  e.step = busy + e.bubble + e.dpExposed + e.zeroGather + e.optimizer;

  // Memory (ZeRO paper's accounting with K = 12 under mixed precision).
  e.weights = deviceParams * computeBytes;
  e.grads = deviceParams * 4;
  e.optimizerState = deviceParams * (mixed ? 12 : 8);
  // par's zero=1 is ZeRO-2's program (Communication/ZeRO.h): each gradient
  // is reduce-scattered straight into its shard.
  // A pipelined step keeps each stage's gradient sums whole until its
  // update (the executor adds every micro-batch's into them); the update
  // reduce-scatters them.
  if (c.zero >= 1) {
    e.optimizerState /= dp;
    if (!pipelined)
      e.grads /= dp;
  }
  if (c.zero >= 3)
    e.weights /= dp;
  double actChunk = act / chunks;
  if (c.recompute == "selective")
    actChunk = (act - coreAct) / chunks;
  double working = 0;
  double hidden =
      model.hiddenBytes * b * scale / (c.sequenceParallel ? t : 1.0);
  if (c.recompute == "full") {
    double layersPerChunk = static_cast<double>(model.layers) / chunks;
    actChunk = layersPerChunk * hidden;
    working = act / static_cast<double>(model.layers);
  }
  if (redoStage) {
    // Only stage inputs wait between a forward and its backward; the
    // backward action holds one micro-batch's saved results while it runs.
    // (Stashing, each micro-batch in flight holds its residuals: actChunk.)
    working += actChunk;
    actChunk = hidden;
  }
  e.activations = actChunk * e.inFlight + working;
  // The state (weights and optimizer state): a CPU program updates it in
  // place (par-donate-buffers: the runner holds one buffer set); a cuda
  // program writes its results into a second set (out-parameters) that the
  // runner swaps (docs/RationaleMemory.md, "Donated buffers"). The peak is
  // the larger of the backward's (the state, the saved activations) and the
  // update's (the state and the gradients).
  double state = e.weights + e.optimizerState;
  double copies = machine.target == "cpu" ? 1 : 2;
  double backwardPeak = copies * state + e.activations;
  double updatePeak = copies * state + e.grads;
  e.peakAtUpdate = updatePeak > backwardPeak;
  e.memory = std::max(backwardPeak, updatePeak);
  e.stateCopies = (copies - 1) * state;
  e.memoryLimit = dev.memoryBytes * dev.usableFraction;
  e.fits = e.memory <= e.memoryLimit;

  // Throughput (Megatron's convention: hardware FLOPs count recomputation;
  // MFU counts the model's 3 x forward GEMMs only).
  double gemm = model.gemmFlopsPerSample();
  double coreGemm = 0;
  for (const KernelCost &k : model.kernels)
    if (k.gemm && k.perSample && k.attentionCore)
      coreGemm += k.flops;
  double batch = static_cast<double>(globalBatch);
  e.modelFlops = 3 * gemm * batch;
  // Recomputed per backward action: what recompute= asks, and with
  // stash=false the stage's forward (ZB-H1: two actions, BW redoing BI's
  // input-gradient GEMMs, half the backward's: 1 forward's GEMMs). A
  // stashing pipeline redoes nothing of its own.
  double recomputedGemm = c.recompute == "full"        ? gemm
                          : c.recompute == "selective" ? coreGemm
                                                       : 0;
  e.hardwareFlops =
      e.modelFlops +
      batch * (actions * ((redoStage ? gemm : 0) + recomputedGemm) +
               (redoHalves ? gemm : 0));
  double devices = static_cast<double>(c.devices());
  e.tflopsPerDevice = e.hardwareFlops / (e.step * devices) / 1e12;
  e.mfu = e.modelFlops / (e.step * devices * peak);
  e.tokensPerSecond = batch * static_cast<double>(model.seq) / e.step;
  e.bubbleShare = e.bubble / e.step;
  e.commShare = (e.tpComm + e.dpExposed + e.zeroGather) / e.step;
  out = e;
  return true;
}

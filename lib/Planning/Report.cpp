//===- Report.cpp - Print predictions -------------------------------------===//

#include "par/Planning/Report.h"
#include "par/Planning/Machine.h"
#include "par/Planning/ModelProfile.h"

#include "llvm/Support/Format.h"

#include <algorithm>

using namespace mlir::par::planning;

static constexpr double kGiB = 1024.0 * 1024 * 1024;

void mlir::par::planning::printProfile(llvm::raw_ostream &os,
                                       const ModelProfile &m) {
  os << "model: @" << m.function << ", " << m.layers << " layers, "
     << llvm::format("%.6g", m.params) << " parameters ("
     << llvm::format("%.6g", m.tpSplitParams) << " split over tensor "
     << "parallelism), batch " << m.batch << ", sequence " << m.seq << ", "
     << m.dtype << "; " << m.kernels.size() << " forward kernels ("
     << m.fusedKernels.size() << " fused), "
     << llvm::format("%.4g", m.gemmFlopsPerSample())
     << " GEMM FLOPs per sample; " << m.tpCollectives.size()
     << " tensor-parallel collectives in the forward ("
     << m.spCollectives.size() << " with sequence parallelism); ";
  if (!m.gradFunction.empty())
    os << "backward from @" << m.gradFunction << " (" << m.gradKernels.size()
       << " kernels with the forward, " << m.gradTPCollectives.size()
       << " tensor-parallel collectives)\n";
  else
    os << m.backwardNote << "\n";
}

void mlir::par::planning::printPredictedLine(llvm::raw_ostream &os,
                                             const Estimate &e) {
  os << "predicted: step " << llvm::format("%.6g", e.step) << " s, "
     << llvm::format("%.4g", e.tflopsPerDevice) << " TFLOP/s per device, MFU "
     << llvm::format("%.3g", e.mfu * 100) << "%, memory "
     << llvm::format("%.4g", e.memory / kGiB) << " GiB per device\n";
}

void mlir::par::planning::printCompileOptions(llvm::raw_ostream &os,
                                              const Estimate &e) {
  os << "mesh: " << e.config.meshLine()
     << " (the model's par.mesh; pp is the number of pipeline ranks); "
        "the model's batch dimension: "
     << e.microBatchSize * e.config.dp
     << " (one micro-batch over the dp ranks; micro-batches=" << e.config.m
     << " makes the step's " << e.microBatchSize * e.config.dp * e.config.m
     << ")\n";
  os << "par-compile --options=\"" << e.config.compileOptions() << "\"\n";
}

void mlir::par::planning::printBreakdown(llvm::raw_ostream &os,
                                         const Estimate &e,
                                         const Machine &machine) {
  os << "configuration: " << e.config.str() << " (micro-batch "
     << e.microBatchSize << ") on " << e.config.devices() << " x "
     << machine.name << "\n";
  auto row = [&](const char *name, double seconds, const char *note = "") {
    os << llvm::format("  %-22s %12.6g s %6.1f%%", name, seconds,
                       e.step > 0 ? 100 * seconds / e.step : 0.0)
       << note << "\n";
  };
  os << "step by phase (busiest pipeline rank):\n";
  row("forward", e.forward);
  row("backward", e.backward);
  const bool pipelined = e.config.pp > 1;
  row("recompute", e.recompute,
      !pipelined ? ""
      : e.config.splitBackward() && !e.config.stash
          ? "  (BI and BW each redo the stage's forward; BW redoes BI's half: "
            "stash=false)"
      : !e.config.stash
          ? "  (every backward redoes its stage's forward: stash=false)"
          : "  (the forwards keep their residuals: no stage forward redone)");
  row("tensor-parallel comm", e.tpComm);
  row("pipeline bubble", e.bubble,
      machine.sharedProcessors > 0 && pipelined
          ? "  (stage transfers included; ranks share processors: a rank "
            "runs faster while others wait)"
          : "  (stage transfers included)");
  row("data-parallel comm", e.dpExposed,
      pipelined ? "  (after the last backward: the stages' updates)"
                : "  (not hidden by the backward)");
  row("zero-3 gathers", e.zeroGather);
  row("optimizer", e.optimizer);
  row("step", e.step);
  os << llvm::format("  data-parallel reduction in all %.6g s; one stage "
                     "transfer %.6g s\n",
                     e.dpTotal, e.p2p);
  os << "memory per device:\n";
  auto mem = [&](const char *name, double bytes) {
    os << llvm::format("  %-22s %12.6g GiB\n", name, bytes / kGiB);
  };
  mem("weights", e.weights);
  mem("gradients", e.grads);
  mem("optimizer state", e.optimizerState);
  mem("activations", e.activations);
  mem("state copies", e.stateCopies);
  os << llvm::format("  %-22s %12.6g GiB of %.6g GiB usable (%s; %d "
                     "micro-batch stage activations in flight; peak in the "
                     "%s)\n",
                     "total", e.memory / kGiB, e.memoryLimit / kGiB,
                     e.fits ? "fits" : "does not fit", e.inFlight,
                     e.peakAtUpdate ? "update: the state + gradients"
                                    : "backward: the state + activations");
  os << llvm::format("throughput: %.6g tokens/s, %.1f TFLOP/s per device, "
                     "MFU %.1f%%, bubble %.1f%%, communication %.1f%%\n",
                     e.tokensPerSecond, e.tflopsPerDevice, e.mfu * 100,
                     e.bubbleShare * 100, e.commShare * 100);
  printCompileOptions(os, e);
}

void mlir::par::planning::printTable(llvm::raw_ostream &os,
                                     const std::vector<Estimate> &rows) {
  os << llvm::format("%-3s %4s %3s %3s %2s %5s %4s %4s %-9s %-3s %-11s "
                     "%11s %10s %7s %6s %9s %7s %6s\n",
                     "#", "dp", "tp", "pp", "v", "m", "b", "zero", "recompute",
                     "sp", "schedule", "step s", "tokens/s", "TFLOP/s", "MFU",
                     "mem GiB", "bubble", "comm");
  int i = 0;
  for (const Estimate &e : rows) {
    const Configuration &c = e.config;
    os << llvm::format(
        "%-3d %4lld %3lld %3lld %2lld %5lld %4lld %4lld %-9s %-3s %-11s "
        "%11.5g %10.4g %7.4g %5.1f%% %9.4g %6.1f%% %5.1f%%\n",
        ++i, (long long)c.dp, (long long)c.tp, (long long)c.pp,
        (long long)c.v, (long long)c.m, (long long)e.microBatchSize,
        (long long)c.zero, c.recompute.c_str(),
        c.sequenceParallel ? "yes" : "no",
        c.pp > 1 ? c.schedule.c_str() : "-", e.step, e.tokensPerSecond,
        e.tflopsPerDevice, e.mfu * 100, e.memory / kGiB, e.bubbleShare * 100,
        e.commShare * 100);
  }
}

void mlir::par::planning::printKernels(llvm::raw_ostream &os,
                                       std::vector<KernelTime> kernels,
                                       int n) {
  std::stable_sort(kernels.begin(), kernels.end(),
                   [](const KernelTime &a, const KernelTime &b) {
                     return a.seconds > b.seconds;
                   });
  os << "most expensive kernels (one micro-batch, one device; gradient "
        "function = forward + backward):\n";
  for (int i = 0; i < n && i < static_cast<int>(kernels.size()); ++i) {
    const KernelTime &k = kernels[i];
    os << llvm::format("  %-9s %-18s %-4s %12.6g s %12.4g FLOPs %12.4g bytes\n",
                       k.backward ? "gradient" : "forward", k.name.c_str(),
                       k.gemm ? "gemm" : "", k.seconds, k.flops, k.bytes);
  }
}

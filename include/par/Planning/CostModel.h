//===- CostModel.h - Step time, FLOPs and memory of a configuration -*- C++ -*-===//
//
// Prices one configuration of a profiled model on a machine
// (docs/Planning.md): each forward kernel by a roofline (matrix units at the
// GEMM efficiency of its size, or vector units, against memory bandwidth,
// plus a launch), the backward as what par-autodiff's gradient function
// adds to the forward (twice the forward without one), recomputation as the
// forward (or its attention cores) again, each tensor-parallel collective
// par places by α–β over the link its group uses, the pipeline by par's own
// timetable (lib/Pipelining/Schedule) with those costs, the data-parallel gradient
// reduction overlapped with the last backward, the optimizer by the bytes it
// touches; memory by the ZeRO formulas and the forward's saved results
// times the activations the timetable keeps in flight, with the state held
// out of place as par runs it.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_PLANNING_COSTMODEL_H
#define PAR_PLANNING_COSTMODEL_H

#include "par/Planning/Configuration.h"

#include <string>
#include <vector>

namespace mlir::par::planning {

struct Machine;
struct ModelProfile;

/// A configuration's predicted step, per device. Times in seconds, memory
/// in bytes.
struct Estimate {
  Configuration config;
  int64_t microBatchSize = 1;
  // Phases of one step on the busiest pipeline rank; they sum to `step`.
  double forward = 0, backward = 0, recompute = 0;
  double tpComm = 0;   // tensor-parallel collectives (not overlapped)
  double bubble = 0;   // pipeline idle time, stage transfers included
  double dpExposed = 0; // the gradient reduction not hidden by the backward
  double zeroGather = 0; // ZeRO-3's parameter gathers not hidden
  double optimizer = 0;
  double step = 0;
  double dpTotal = 0;  // the whole gradient reduction (hidden or not)
  double p2p = 0;      // one stage transfer
  // Memory per device.
  double weights = 0, grads = 0, optimizerState = 0, activations = 0;
  /// The extra copy of weights and optimizer state (a cuda program's
  /// update writes a second buffer set; a CPU program's is in place: 0);
  /// the peak holds the weights, the optimizer state and this, plus the
  /// gradients at the update or the activations in the backward.
  double stateCopies = 0;
  bool peakAtUpdate = false;
  double memory = 0;
  double memoryLimit = 0;
  bool fits = false;
  int inFlight = 1; // (micro-batch, stage) activations held on rank 0
  // Throughput.
  double modelFlops = 0;    // per step, whole job: 3 x forward GEMMs
  double hardwareFlops = 0; // plus recomputation
  double tflopsPerDevice = 0; // hardware FLOP/s per device / 1e12
  double mfu = 0;             // model FLOP/s / (devices x peak)
  double tokensPerSecond = 0;
  double bubbleShare = 0, commShare = 0;
};

/// Prices `config` (already checked by checkConfiguration). Returns false
/// with `error` when the machine cannot run it (no peak for its precision).
bool estimate(const ModelProfile &model, const Machine &machine,
              const Configuration &config, int64_t globalBatch,
              Estimate &out, std::string &error);

/// One kernel's priced time for one micro-batch on one device.
struct KernelTime {
  std::string name;
  bool gemm = false;
  bool backward = false; // a kernel of the gradient function
  double flops = 0, bytes = 0, seconds = 0;
};

/// Every kernel of the forward and of the gradient function priced for
/// `config` (the rows behind Estimate::forward and backward).
std::vector<KernelTime> kernelTimes(const ModelProfile &model,
                                    const Machine &machine,
                                    const Configuration &config,
                                    int64_t globalBatch);

/// α–β time of one ring collective (`kind` as in TPCollective) of a
/// `fullBytes` tensor over `n` devices on a link of `bandwidth` bytes/s and
/// `latency` s per step.
double collectiveSeconds(const std::string &kind, double fullBytes, int64_t n,
                         double bandwidth, double latency);

} // namespace mlir::par::planning

#endif // PAR_PLANNING_COSTMODEL_H

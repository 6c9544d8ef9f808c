//===- Machine.h - A machine the planner predicts for -----------*- C++ -*-===//
//
// What par-plan knows of a machine: one device (peak FLOP/s per dtype,
// memory, bandwidth, kernel launch, GEMM efficiency by size), a node of
// such devices on a fast link (NVLink), and the network between nodes.
// Read from the JSON files of share/par/machines (schema: docs/Planning.md).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_PLANNING_MACHINE_H
#define PAR_PLANNING_MACHINE_H

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mlir::par::planning {

struct DeviceSpec {
  /// Dense matrix-unit peak per compute dtype ("bf16", "f16", "f32").
  std::map<std::string, double> peakFlops;
  /// FLOP/s of elementwise and reduction kernels (vector units).
  double vectorFlops = 0;
  double memoryBytes = 0;
  /// The fraction of memoryBytes a program may plan for (runtime, fragmentation).
  double usableFraction = 0.9;
  /// Bytes/s of device memory.
  double memoryBandwidth = 0;
  /// Seconds per kernel launch.
  double launchSeconds = 0;
  /// (FLOPs of one GEMM, fraction of peak reached), ascending in FLOPs;
  /// interpolated on log(FLOPs), clamped at both ends.
  std::vector<std::pair<double, double>> gemmEfficiency;

  double gemmEfficiencyAt(double flops) const;
  /// The matrix peak for `dtype`, or 0 when the device has none.
  double peakFor(const std::string &dtype) const;
};

struct LinkSpec {
  double bandwidth = 0; // bytes/s one device sends (one direction)
  double latency = 0;   // seconds per ring step
};

struct Machine {
  std::string name;
  std::string description;
  std::vector<std::string> sources;
  DeviceSpec device;
  int devicesPerNode = 1;
  /// Processors the node's devices share (0: each device is its own, as a
  /// GPU is). cpu-local's 8 ranks share 2 cores: its device rates are
  /// measured with every rank busy, so a rank runs faster while others
  /// wait (CostModel.cpp's pipeline simulation).
  double sharedProcessors = 0;
  /// How far the slowest rank lags between two collectives, as a fraction
  /// of the computation between them (0: none). A synchronous step waits
  /// for it at every collective, so computation takes 1 + this. cpu-local:
  /// 8 ranks time-sliced on 2 cores, about 0.1 (par-calibrate-cpu).
  double syncStretch = 0;
  LinkSpec node;    // inside a node
  LinkSpec network; // between nodes
  std::string collectiveAlgorithm = "ring";
  /// par's target for this machine: "cpu" or "cuda". It decides how many
  /// copies of the state par holds at the update (CostModel.cpp).
  std::string target = "cuda";
};

/// Reads a machine from `nameOrPath`: a name ("h100") looked up as
/// NAME.json in `machinesDir`, or a path to a JSON file. Returns false with
/// `error` naming the problem (unknown machine and the known ones, a
/// missing or mistyped field).
bool loadMachine(const std::string &nameOrPath, const std::string &machinesDir,
                 Machine &out, std::string &error);

/// Parses a machine from JSON text (`origin` names it in errors).
bool parseMachine(const std::string &text, const std::string &origin,
                  Machine &out, std::string &error);

/// The machine names in `machinesDir` (file stems), sorted.
std::vector<std::string> listMachines(const std::string &machinesDir);

} // namespace mlir::par::planning

#endif // PAR_PLANNING_MACHINE_H

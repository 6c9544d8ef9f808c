//===- PlanningTest.cpp - The planner's pure logic ------------------------===//
//
// lib/Planning without a model: machine files, configurations, the α–β
// and roofline pieces of the cost model, and its composition with the
// pipeline timetable on a hand-made profile whose step is known in closed
// form.
//
//===----------------------------------------------------------------------===//

#include "par/Planning/Configuration.h"
#include "par/Planning/CostModel.h"
#include "par/Planning/Machine.h"
#include "par/Planning/ModelProfile.h"

#include <gtest/gtest.h>

using namespace mlir::par::planning;

namespace {

const char *kMachine = R"({
  "name": "unit",
  "device": {"peak_flops": {"bf16": 1e12, "f32": 5e11}, "vector_flops": 1e11,
             "memory_bytes": 1e10, "usable_memory_fraction": 1.0,
             "memory_bandwidth": 1e15, "kernel_launch_s": 0,
             "gemm_efficiency": [[1e9, 0.2], [1e11, 0.8]]},
  "node": {"devices": 8, "link_bandwidth": 1e9, "link_latency_s": 0},
  "network": {"bandwidth": 1e8, "latency_s": 0}
})";

Machine machine() {
  Machine m;
  std::string error;
  EXPECT_TRUE(parseMachine(kMachine, "unit", m, error)) << error;
  return m;
}

/// A model of `layers` layers, each one GEMM of `flops` per sample (all
/// split over tp, results `act` bytes per sample), `params` parameters.
ModelProfile profile(int layers, double flops, double act, double params) {
  ModelProfile p;
  p.function = "f";
  p.batch = 8;
  p.seq = 1;
  p.dtype = "bf16";
  p.dtypeBytes = 2;
  p.tpAxis = "tp";
  p.tpDivisor = 8;
  p.layers = layers;
  p.params = params;
  p.tpSplitParams = params;
  for (int i = 0; i < layers; ++i) {
    KernelCost k;
    k.name = "linalg.matmul";
    k.gemm = true;
    k.flops = flops;
    k.resultBytes = act;
    k.tpSplit = true;
    p.kernels.push_back(k);
  }
  return p;
}

} // namespace

TEST(Planning, MachineFile) {
  Machine m = machine();
  EXPECT_EQ(m.devicesPerNode, 8);
  EXPECT_DOUBLE_EQ(m.device.peakFor("bf16"), 1e12);
  EXPECT_DOUBLE_EQ(m.device.peakFor("f16"), 0);
  // Log-interpolated between the rows, clamped outside them.
  EXPECT_NEAR(m.device.gemmEfficiencyAt(1e10), 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(m.device.gemmEfficiencyAt(1e3), 0.2);
  EXPECT_DOUBLE_EQ(m.device.gemmEfficiencyAt(1e15), 0.8);

  Machine bad;
  std::string error;
  EXPECT_FALSE(parseMachine(R"({"device": {}})", "x.json", bad, error));
  EXPECT_EQ(error, "x.json: missing object \"peak_flops\"");
  EXPECT_FALSE(parseMachine("{", "y.json", bad, error));
  EXPECT_NE(error.find("y.json: "), std::string::npos);
}

TEST(Planning, Configuration) {
  Configuration c;
  std::string error;
  ASSERT_TRUE(parseConfiguration("dp=2 tp=4 pp=2 v=2 m=8 zero=0 "
                                 "recompute=selective sequence-parallel=true "
                                 "schedule=interleaved precision=f16",
                                 c, error))
      << error;
  Configuration d;
  ASSERT_TRUE(parseConfiguration(c.str(), d, error));
  EXPECT_EQ(d.str(), c.str());
  EXPECT_EQ(c.compileOptions(),
            "optimizer=adamw micro-batches=8 precision=f16 stages=4 "
            "schedule=interleaved virtual=2 recompute=selective "
            "sequence-parallel=true");
  EXPECT_FALSE(parseConfiguration("dq=2", c, error));
  EXPECT_NE(error.find("unknown configuration key 'dq'"), std::string::npos);
  EXPECT_FALSE(parseConfiguration("zero=4", c, error));
  EXPECT_FALSE(parseConfiguration("tp=0", c, error));
  EXPECT_FALSE(parseConfiguration("schedule=fast", c, error));

  ModelProfile p = profile(4, 1e9, 0, 1e6);
  Configuration e;
  e.dp = 2, e.tp = 4, e.m = 2;
  EXPECT_EQ(checkConfiguration(e, p, 8, 8), "");
  EXPECT_NE(checkConfiguration(e, p, 16, 8), "");  // devices
  EXPECT_NE(checkConfiguration(e, p, 8, 6), "");   // batch
  e.tp = 4, e.pp = 1;
  p.tpDivisor = 2;
  EXPECT_NE(checkConfiguration(e, p, 8, 8), "");   // tp divides
}

TEST(Planning, CollectiveSeconds) {
  // Ring: all-reduce 2(n-1)/n S / bw, the others (n-1)/n S / bw.
  EXPECT_DOUBLE_EQ(collectiveSeconds("all_reduce", 1e9, 4, 1e9, 0), 1.5);
  EXPECT_DOUBLE_EQ(collectiveSeconds("all_gather", 1e9, 4, 1e9, 0), 0.75);
  EXPECT_DOUBLE_EQ(collectiveSeconds("reduce_scatter", 1e9, 4, 1e9, 1e-3),
                   0.75 + 3e-3);
  EXPECT_DOUBLE_EQ(collectiveSeconds("all_reduce", 1e9, 1, 1e9, 1), 0);
}

// One GEMM per layer: forward = flops / (peak x efficiency), backward twice
// that. par's pipelined backward runs on the residuals its forward kept
// (B = b), so 1F1B's makespan with free transfers is (m + p - 1)(f + b)
// and the bubble (p - 1)(f + b), each micro-batch in flight holding its
// stage's activations; with stash=false it recomputes its stage's forward
// first (B = f + b): the makespan (m + p - 1)(f + f + b), the bubble
// (p - 1)(2f + b), and only stage inputs wait. Memory by the ZeRO paper's
// bytes per parameter.
TEST(Planning, EstimateComposesTheTimetable) {
  Machine m = machine();
  ModelProfile p = profile(4, 1e11, 1e6, 1e8);
  Configuration c;
  c.dp = 1, c.tp = 1, c.pp = 2, c.m = 4, c.schedule = "1f1b";
  c.precision = "bf16";
  {
    Estimate e;
    std::string error;
    ASSERT_TRUE(estimate(p, m, c, /*globalBatch=*/4, e, error)) << error;
    double f = 2 * 0.125, b = 2 * f;
    EXPECT_NEAR(e.forward, 4 * f, 1e-9);
    EXPECT_NEAR(e.backward, 4 * b, 1e-9);
    EXPECT_DOUBLE_EQ(e.recompute, 0);
    EXPECT_NEAR(e.bubble, (2 - 1) * (f + b), 1e-6);
    // Two micro-batches in flight, each its stage's two layers' results.
    EXPECT_DOUBLE_EQ(e.inFlight, 2);
    EXPECT_DOUBLE_EQ(e.activations, 2 * 2e6);
    // Hardware FLOPs: nothing redone, so the model's (3 x 4e11 x 4); with
    // recompute=full one forward more (Megatron's 4/3).
    EXPECT_DOUBLE_EQ(e.hardwareFlops, 3 * 4e11 * 4);
    Configuration full = c;
    full.recompute = "full";
    ASSERT_TRUE(estimate(p, m, full, 4, e, error)) << error;
    EXPECT_DOUBLE_EQ(e.hardwareFlops, 4 * 4e11 * 4);
  }
  c.stash = false;
  Estimate e;
  std::string error;
  ASSERT_TRUE(estimate(p, m, c, /*globalBatch=*/4, e, error)) << error;
  // Micro-batch 1: each layer 1e11 FLOPs at 0.8 x 1e12 = 0.125 s.
  double f = 2 * 0.125, b = 2 * f; // per stage: two layers
  EXPECT_NEAR(e.forward, 4 * f, 1e-9);
  EXPECT_NEAR(e.backward, 4 * b, 1e-9);
  EXPECT_NEAR(e.recompute, 4 * f, 1e-9);
  EXPECT_NEAR(e.bubble, (2 - 1) * (f + f + b), 1e-6);
  EXPECT_DOUBLE_EQ(e.dpExposed, 0);
  // Per device 5e7 parameters: 2 + 4 + 12 bytes each.
  EXPECT_DOUBLE_EQ(e.weights, 1e8);
  EXPECT_DOUBLE_EQ(e.grads, 2e8);
  EXPECT_DOUBLE_EQ(e.optimizerState, 6e8);
  // Two stage inputs in flight (1F1B holds p on the first stage; this
  // profile's are 0 bytes) and one micro-batch's two layers' results while
  // a backward runs.
  EXPECT_DOUBLE_EQ(e.inFlight, 2);
  EXPECT_DOUBLE_EQ(e.activations, 2e6);
  EXPECT_NEAR(e.step,
              e.forward + e.backward + e.recompute + e.bubble + e.optimizer,
              1e-9);
  // Model FLOPs 3 x 4e11 x 4 samples; stash=false redoes each stage's
  // forward in its backward: one forward more in hardware FLOPs.
  EXPECT_DOUBLE_EQ(e.modelFlops, 3 * 4e11 * 4);
  EXPECT_DOUBLE_EQ(e.hardwareFlops, 4 * 4e11 * 4);

  // ZeRO-1 over dp=2 halves the optimizer state and the gradients; tp=2
  // halves the split parameters.
  Configuration z;
  z.dp = 2, z.tp = 2, z.m = 2, z.zero = 1;
  ASSERT_TRUE(estimate(p, m, z, 4, e, error)) << error;
  EXPECT_DOUBLE_EQ(e.weights, 1e8);
  EXPECT_DOUBLE_EQ(e.optimizerState, 12 * 5e7 / 2);
  // par's zero=1 reduce-scatters the gradients too (ZeRO-2's program).
  EXPECT_DOUBLE_EQ(e.grads, 4 * 5e7 / 2);
}

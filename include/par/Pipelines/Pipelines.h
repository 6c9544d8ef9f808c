//===- Pipelines.h - par's pass pipelines -----------------------*- C++ -*-===//
//
// The one compiler pipeline, as a library (CIRCT's Firtool, IREE's
// Pipelines.h): an options struct and phases, each built from typed pass
// creation. par-compile and `par-opt --par-compile-pipeline` call the same
// functions, so nothing about the order of passes lives in a script or a
// README. The phases, in order:
//
//   normalize       always: torch-mlir's forms to par's
//                   (par-normalize-torch, lib/Frontend)
//   precision       precision != f32: mixed precision, loss scale
//   pipeline split  stages > 0: forward stage functions, cut by cost
//   train           optimizer != none: gradients (par-autodiff) and the
//                   step (par-optimizer)
//   schedule        stages > 0: every pipeline rank's actions
//   spmd            propagation, partitioning, cleanup, reductions sunk,
//                   gradient compression, gradient buckets, verify (or,
//                   for the reference, the shardings stripped)
//   export          the manifest, when a path is given
//   bufferize       one-shot bufferization, buckets started and waited
//                   for asynchronously, deallocation
//   lower           runtime calls, loops, LLVM dialect, packed entries
//
// A new phase is one more function here and one more group of options
// below.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_PIPELINES_PIPELINES_H
#define PAR_PIPELINES_PIPELINES_H

#include "par/Communication/Passes.h"
#include "par/Dialect/Par/Transforms/Passes.h"
#include "par/Pipelining/Passes.h"
#include "par/Training/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir::par {

/// Options of `par-spmd`.
struct SPMDPipelineOptions
    : public PassPipelineOptions<SPMDPipelineOptions> {
  inline static const BucketReductionsOptions kBucket{};
  Option<std::string> gradReduce{
      *this, "grad-reduce",
      llvm::cl::desc("Mixed precision: the type of the data-parallel "
                     "gradient reduction, f32 (default) or compute"),
      llvm::cl::init("f32")};
  Option<bool> sinkReductions{
      *this, "sink-reductions",
      llvm::cl::desc("Let partial values flow through linear ops "
                     "(par-sink-reductions; default true)"),
      llvm::cl::init(true)};
  Option<int64_t> bucketBytes{
      *this, "bucket-bytes",
      llvm::cl::desc("Largest gradient bucket in local bytes "
                     "(par-bucket-reductions; 0: every all-reduce alone)"),
      llvm::cl::init(kBucket.bucketBytes)};
  Option<std::string> compress{
      *this, "compress",
      llvm::cl::desc("Compress the data-parallel gradient reductions "
                     "(par-compress-gradients): none (default), int8, sign "
                     "or topk"),
      llvm::cl::init("none")};
  inline static const CompressGradientsOptions kCompress{};
  Option<double> compressRatio{
      *this, "compress-ratio",
      llvm::cl::desc("topk: the fraction of each bucket's elements sent"),
      llvm::cl::init(kCompress.ratio)};
  Option<int64_t> compressChunk{
      *this, "compress-chunk",
      llvm::cl::desc("int8, sign: elements per scale"),
      llvm::cl::init(kCompress.chunk)};
  Option<bool> errorFeedback{
      *this, "error-feedback",
      llvm::cl::desc("Compression keeps what it dropped and adds it back "
                     "the next step (default true)"),
      llvm::cl::init(kCompress.errorFeedback)};
  Option<int64_t> compressMinElements{
      *this, "compress-min-elements",
      llvm::cl::desc("Gradients with fewer elements stay uncompressed"),
      llvm::cl::init(kCompress.minElements)};
  Option<int64_t> compressWarmup{
      *this, "compress-warmup",
      llvm::cl::desc("Steps reduced uncompressed before compression starts"),
      llvm::cl::init(kCompress.warmup)};
  Option<bool> report{*this, "report",
                      llvm::cl::desc("Print the communication report"),
                      llvm::cl::init(false)};
};

/// Options of the whole pipeline (`par-compile --options=...`,
/// `par-opt --par-compile-pipeline=...`). One value per concept: the
/// micro-batch count feeds both the optimizer and the schedule.
struct CompileOptions : public PassPipelineOptions<CompileOptions> {
  // Defaults come from the passes' own options (their Passes.td), so the
  // pipeline and the passes run alone never disagree.
  inline static const OptimizerOptions kOpt{};
  inline static const PipelineScheduleOptions kSched{};

  // Mixed precision (before everything: the pipeline split cuts 16-bit
  // activations).
  Option<std::string> precision{
      *this, "precision",
      llvm::cl::desc("f32 (as given), f16 or bf16: compute type of "
                     "par-mixed-precision, master weights stay f32"),
      llvm::cl::init("f32")};
  Option<std::string> gradReduce{
      *this, "grad-reduce",
      llvm::cl::desc("Mixed precision: reduce data-parallel gradients in f32 "
                     "(default, Megatron's) or in the compute type (half "
                     "the bytes, as DDP's fp16/bf16 hooks)"),
      llvm::cl::init("f32")};
  // Communication.
  Option<bool> sinkReductions{
      *this, "sink-reductions",
      llvm::cl::desc("Reduce partial values after the linear ops that use "
                     "them (one reduction for several, micro-batch "
                     "gradients reduced once per step; default true)"),
      llvm::cl::init(true)};
  inline static const BucketReductionsOptions kBucket{};
  Option<int64_t> bucketBytes{
      *this, "bucket-bytes",
      llvm::cl::desc("Data-parallel gradients and other all-reduces of one "
                     "group are sent in buckets of at most this many local "
                     "bytes, each one message started asynchronously "
                     "(DDP's 25 MiB by default; 0: one blocking message "
                     "per all-reduce)"),
      llvm::cl::init(kBucket.bucketBytes)};
  Option<std::string> compress{
      *this, "compress",
      llvm::cl::desc("Compress the data-parallel gradient reductions "
                     "(par-compress-gradients): none (default), int8, sign "
                     "or topk"),
      llvm::cl::init("none")};
  inline static const CompressGradientsOptions kCompress{};
  Option<double> compressRatio{
      *this, "compress-ratio",
      llvm::cl::desc("topk: the fraction of each bucket's elements sent"),
      llvm::cl::init(kCompress.ratio)};
  Option<int64_t> compressChunk{
      *this, "compress-chunk",
      llvm::cl::desc("int8, sign: elements per scale"),
      llvm::cl::init(kCompress.chunk)};
  Option<bool> errorFeedback{
      *this, "error-feedback",
      llvm::cl::desc("Compression keeps what it dropped and adds it back "
                     "the next step (default true)"),
      llvm::cl::init(kCompress.errorFeedback)};
  Option<int64_t> compressMinElements{
      *this, "compress-min-elements",
      llvm::cl::desc("Gradients with fewer elements stay uncompressed"),
      llvm::cl::init(kCompress.minElements)};
  Option<int64_t> compressWarmup{
      *this, "compress-warmup",
      llvm::cl::desc("Steps reduced uncompressed before compression starts"),
      llvm::cl::init(kCompress.warmup)};
  Option<std::string> target{
      *this, "target",
      llvm::cl::desc("cpu, or cuda[:CHIP] (default chip sm_90): kernels "
                     "through NVVM to a fatbin, matmuls on cuBLAS, "
                     "collectives on NCCL; the reference stays a CPU program"),
      llvm::cl::init("cpu")};
  ListOption<std::string> keep{
      *this, "keep",
      llvm::cl::desc("Op kinds that stay f32 under mixed precision "
                     "(matmul, elementwise, reduction, softmax; none)")};

  inline static const LossScaleOptions kScale{};
  Option<std::string> lossScale{
      *this, "loss-scale",
      llvm::cl::desc("none, static or dynamic loss scaling (par-loss-scale); "
                     "auto (default): dynamic for f16, none otherwise (bf16 "
                     "has f32's range)"),
      llvm::cl::init("auto")};
  Option<double> initScale{*this, "init-scale",
                           llvm::cl::desc("The first step's loss scale"),
                           llvm::cl::init(kScale.initScale)};
  Option<double> growthFactor{*this, "growth-factor",
                              llvm::cl::desc("Dynamic scaling: growth factor"),
                              llvm::cl::init(kScale.growthFactor)};
  Option<double> backoffFactor{
      *this, "backoff-factor",
      llvm::cl::desc("Dynamic scaling: back-off factor"),
      llvm::cl::init(kScale.backoffFactor)};
  Option<int64_t> growthInterval{
      *this, "growth-interval",
      llvm::cl::desc("Dynamic scaling: finite steps before growth"),
      llvm::cl::init(kScale.growthInterval)};
  Option<int64_t> hysteresis{
      *this, "hysteresis",
      llvm::cl::desc("Dynamic scaling: overflows tolerated before back-off"),
      llvm::cl::init(kScale.hysteresis)};
  Option<double> minScale{*this, "min-scale",
                          llvm::cl::desc("Dynamic scaling: the minimum scale"),
                          llvm::cl::init(kScale.minScale)};

  // Training.
  Option<std::string> optimizer{
      *this, "optimizer",
      llvm::cl::desc("none (the program is compiled as given), sgd, "
                     "momentum or adamw: build the train step"),
      llvm::cl::init("none")};
  Option<double> lr{*this, "lr", llvm::cl::desc("Learning rate"),
                    llvm::cl::init(kOpt.lr)};
  Option<double> momentum{*this, "momentum",
                          llvm::cl::desc("Momentum coefficient"),
                          llvm::cl::init(kOpt.momentum)};
  Option<double> beta1{*this, "beta1", llvm::cl::desc("AdamW beta1"),
                       llvm::cl::init(kOpt.beta1)};
  Option<double> beta2{*this, "beta2", llvm::cl::desc("AdamW beta2"),
                       llvm::cl::init(kOpt.beta2)};
  Option<double> epsilon{*this, "eps", llvm::cl::desc("AdamW epsilon"),
                         llvm::cl::init(kOpt.epsilon)};
  Option<double> weightDecay{*this, "weight-decay",
                             llvm::cl::desc("AdamW decoupled weight decay"),
                             llvm::cl::init(kOpt.weightDecay)};
  Option<double> clipNorm{*this, "clip-norm",
                          llvm::cl::desc("Clip gradients to this global "
                                         "norm (0: off)"),
                          llvm::cl::init(kOpt.clipNorm)};
  Option<std::string> lrSchedule{
      *this, "lr-schedule",
      llvm::cl::desc("Learning-rate schedule: constant or cosine"),
      llvm::cl::init(kOpt.schedule)};
  Option<int64_t> warmupSteps{*this, "warmup-steps",
                              llvm::cl::desc("Linear warmup steps (cosine)"),
                              llvm::cl::init(kOpt.warmupSteps)};
  Option<int64_t> totalSteps{*this, "total-steps",
                             llvm::cl::desc("Steps of the cosine decay"),
                             llvm::cl::init(kOpt.totalSteps)};
  Option<int64_t> microBatches{
      *this, "micro-batches",
      llvm::cl::desc("Micro-batches per step (gradient accumulation, and "
                     "the pipeline schedule's m)"),
      llvm::cl::init(kOpt.microBatches)};
  Option<int64_t> zero{
      *this, "zero",
      llvm::cl::desc("ZeRO stage: 0, or 1 (optimizer state and update "
                     "sharded over the data-parallel axes; not with stages)"),
      llvm::cl::init(kOpt.zero)};
  ListOption<std::string> zeroAxes{
      *this, "zero-axes",
      llvm::cl::desc("zero=1: the mesh axes to shard the optimizer state "
                     "over (default: those the data's dim 0 is split over)")};
  // Pipelining.
  Option<int64_t> stages{*this, "stages",
                         llvm::cl::desc("Pipeline stages (0: no pipeline)"),
                         llvm::cl::init(0)};
  Option<std::string> schedule{
      *this, "schedule",
      llvm::cl::desc("Pipeline schedule: gpipe, 1f1b, interleaved, zbh1"),
      llvm::cl::init(kSched.schedule)};
  Option<int64_t> virtualStages{
      *this, "virtual",
      llvm::cl::desc("Stages per pipeline rank (interleaved)"),
      llvm::cl::init(kSched.virtualStages)};
  Option<std::string> pipelineAxis{
      *this, "pipeline-axis", llvm::cl::desc("The mesh axis of the stages"),
      llvm::cl::init(kSched.axis)};
  Option<bool> splitBackward{
      *this, "split-backward",
      llvm::cl::desc("Split each stage backward into input and weight "
                     "halves (implied by schedule=zbh1)"),
      llvm::cl::init(false)};
  // CPU kernels.
  Option<bool> fuseReductions{
      *this, "fuse-reductions",
      llvm::cl::desc("CPU: tile chains with reductions (LayerNorm, softmax, "
                     "cross-entropy, their backwards) into one loop nest each "
                     "(par-fuse-reductions)"),
      llvm::cl::init(true)};
  Option<bool> fpReassociate{
      *this, "fp-reassociate",
      llvm::cl::desc("CPU: reassociate float reductions so they vectorise "
                     "(par-fast-math reassociate; off: sequential sums)"),
      llvm::cl::init(true)};
  Option<bool> mathApprox{
      *this, "math-approx",
      llvm::cl::desc("CPU: f32 exp/log/tanh as vectorisable polynomial "
                     "approximations (par-fast-math approximate; off: libm)"),
      llvm::cl::init(true)};
  Option<bool> outlineKernels{
      *this, "outline-kernels",
      llvm::cl::desc("CPU: every kernel a function, identical ones once "
                     "(par-outline-kernels; off: one flat function per "
                     "entry, compiled per copy)"),
      llvm::cl::init(true)};
  // Reports and outputs.
  Option<bool> report{*this, "report",
                      llvm::cl::desc("Print the stage split, the "
                                     "schedule diagram and the optimizer "
                                     "state's layout and bytes"),
                      llvm::cl::init(false)};
  Option<bool> commReport{
      *this, "comm-report",
      llvm::cl::desc("Print the communication report of every function"),
      llvm::cl::init(false)};
  Option<std::string> manifest{
      *this, "manifest",
      llvm::cl::desc("Write the manifest (JSON) to this file before "
                     "bufferizing"),
      llvm::cl::init("")};
  Option<bool> reference{
      *this, "reference",
      llvm::cl::desc("Build the unsharded reference: shardings stripped "
                     "instead of partitioned"),
      llvm::cl::init(false)};
};

/// What differs between the two programs of an artifact (the sharded one
/// and its unsharded reference): the back half's options.
struct BackendOptions {
  bool reference = false;   // strip shardings instead of partitioning
  std::string manifest;     // manifest path ("" = none)
  bool report = false;      // communication report
  std::string gradReduce = "f32"; // or "compute" (mixed precision)
  bool sinkReductions = true;     // par-sink-reductions
  int64_t bucketBytes = BucketReductionsOptions{}.bucketBytes; // 0: none
  std::string compress = "none"; // par-compress-gradients' method
  double compressRatio = CompressGradientsOptions{}.ratio;
  int64_t compressChunk = CompressGradientsOptions{}.chunk;
  bool errorFeedback = CompressGradientsOptions{}.errorFeedback;
  int64_t compressMinElements = CompressGradientsOptions{}.minElements;
  int64_t compressWarmup = CompressGradientsOptions{}.warmup;
  std::string target = "cpu"; // the manifest's target ("cuda:sm_90")
};

/// The CPU kernels' options (par-compile fuse-reductions, fp-reassociate,
/// math-approx; docs/RationaleCPUKernels.md).
struct CPUKernelOptions {
  bool fuseReductions = true;
  bool fpReassociate = true;
  bool mathApprox = true;
  bool outlineKernels = true;
  bool report = false; // par-outline-kernels' kernel counts
};
CPUKernelOptions getCPUKernelOptions(const CompileOptions &options);

/// par-lower-cpu's options.
struct LowerCPUPipelineOptions
    : public PassPipelineOptions<LowerCPUPipelineOptions> {
  PassOptions::Option<bool> fuseReductions{
      *this, "fuse-reductions", llvm::cl::desc("par-fuse-reductions"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> fpReassociate{
      *this, "fp-reassociate", llvm::cl::desc("par-fast-math reassociate"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> mathApprox{
      *this, "math-approx", llvm::cl::desc("par-fast-math approximate"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> outlineKernels{
      *this, "outline-kernels", llvm::cl::desc("par-outline-kernels"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> report{
      *this, "report", llvm::cl::desc("par-outline-kernels report"),
      llvm::cl::init(false)};
  CPUKernelOptions get() const {
    return {fuseReductions, fpReassociate, mathApprox, outlineKernels, report};
  }
};

/// The cuda target (par-compile --target cuda[:CHIP]): where the kernels'
/// binary comes from. The toolkit path is always passed to the serializer
/// (Debian's MLIR has none compiled in; without it libdevice is not linked).
struct GPUTargetOptions {
  std::string chip = "sm_90";
  std::string features = "+ptx80";
  std::string toolkit = "/usr/local/cuda";
  std::string format = "fatbin"; // gpu-module-to-binary: isa, bin, fatbin
  int64_t blockSize = 256;       // par-gpu-map-linalg's block-size
};

/// par-opt's form of GPUTargetOptions (the par-lower-gpu pipeline).
struct LowerGPUPipelineOptions
    : public PassPipelineOptions<LowerGPUPipelineOptions> {
  PassOptions::Option<std::string> chip{*this, "chip",
                                        llvm::cl::desc("CUDA chip"),
                                        llvm::cl::init("sm_90")};
  PassOptions::Option<std::string> features{
      *this, "features", llvm::cl::desc("PTX features"),
      llvm::cl::init("+ptx80")};
  PassOptions::Option<std::string> toolkit{
      *this, "toolkit", llvm::cl::desc("CUDA toolkit (libdevice, ptxas)"),
      llvm::cl::init("/usr/local/cuda")};
  PassOptions::Option<std::string> format{
      *this, "format",
      llvm::cl::desc("Kernel binary: isa (PTX), bin (cubin), fatbin"),
      llvm::cl::init("fatbin")};
  PassOptions::Option<int64_t> blockSize{
      *this, "block-size", llvm::cl::desc("Threads per block"),
      llvm::cl::init(256)};
  GPUTargetOptions get() const {
    return {chip, features, toolkit, format, blockSize};
  }
};

/// Parses a --target value: "cpu", "cuda" or "cuda:<chip>" (sm_NN). False
/// with `error` set for anything else.
bool parseTarget(llvm::StringRef target, bool &isCuda, GPUTargetOptions &gpu,
                 std::string &error);

/// The back half's options as `options` states them.
BackendOptions getBackendOptions(const CompileOptions &options);

/// Propagation, partitioning, cleanup and the stage's verify pass.
void buildSPMDPipeline(OpPassManager &pm, const SPMDPipelineOptions &options);

/// The phases, each usable alone.
void buildPrecisionPhase(OpPassManager &pm, const CompileOptions &options);
void buildPipelineSplitPhase(OpPassManager &pm, const CompileOptions &options);
void buildTrainPhase(OpPassManager &pm, const CompileOptions &options);
void buildSchedulePhase(OpPassManager &pm, const CompileOptions &options);
void buildSPMDPhase(OpPassManager &pm, const BackendOptions &options);
void buildExportPhase(OpPassManager &pm, const BackendOptions &options);
/// `outParams`: results become trailing out-parameters written in place
/// (the cuda target's calling convention; the CPU returns buffers).
/// `kernels` (CPU only): the tensor-level kernel passes (fusion with
/// reductions, fast math) after elementwise fusion.
void buildBufferizePhase(OpPassManager &pm, bool outParams = false,
                         const CPUKernelOptions *kernels = nullptr);
/// `kernels`: whether kernels are outlined (and reported).
void buildLowerCPUPhase(OpPassManager &pm,
                        const CPUKernelOptions &kernels = {});
/// Buffers to kernels (par-gpu-map-linalg), device memory, collectives and
/// matmuls as runtime calls (NCCL, cuBLAS), then host and device code to
/// the LLVM dialect with the kernels serialized into the module.
void buildLowerGPUPhase(OpPassManager &pm, const GPUTargetOptions &options);

/// The front half (normalize, precision, split, train, schedule): what the sharded program and
/// its reference share.
void buildFrontendPipeline(OpPassManager &pm, const CompileOptions &options);
/// The back half (spmd or strip, export, bufferize, lower).
void buildBackendPipeline(OpPassManager &pm, const BackendOptions &options);
/// Everything: a model in, the LLVM dialect out (par-compile-pipeline).
void buildCompilePipeline(OpPassManager &pm, const CompileOptions &options);

/// Bufferization and lowering of a partitioned program to the LLVM dialect
/// for the CPU (buildBufferizePhase + buildLowerCPUPhase).
void buildLowerCPUPipeline(OpPassManager &pm,
                           const CPUKernelOptions &kernels = {});
/// The same for the cuda target (buildBufferizePhase with out-parameters +
/// buildLowerGPUPhase).
void buildLowerGPUPipeline(OpPassManager &pm, const GPUTargetOptions &options);

/// Registers `par-spmd`, `par-lower-cpu` and `par-compile-pipeline`.
void registerParPipelines();

} // namespace mlir::par

#endif // PAR_PIPELINES_PIPELINES_H

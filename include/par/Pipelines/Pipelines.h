//===- Pipelines.h - par's pass pipelines -----------------------*- C++ -*-===//
//
// The one compiler pipeline, as a library (CIRCT's Firtool, IREE's
// Pipelines.h): option groups, the target spec and phases, each phase built
// from typed pass creation. par-compile and `par-opt --par-compile-pipeline`
// check their options with the same function (checkCompileOptions) and build
// with the same functions (buildFrontendPipeline, buildBackendPipeline), so
// nothing about the order of passes or the options' meaning lives in a
// tool, a script or a README. The phases, in order:
//
//   normalize       always: torch-mlir's forms to par's
//                   (par-normalize-torch, lib/Frontend)
//   precision       precision != f32: mixed precision, loss scale
//   pipeline split  stages > 0: forward stage functions, cut by cost
//   train           optimizer != none: gradients (par-autodiff), what the
//                   backward recomputes (par-recompute) and the step
//                   (par-optimizer)
//   schedule        stages > 0: every pipeline rank's actions
//   spmd            propagation, partitioning, cleanup, reductions sunk,
//                   gradient compression, gradient buckets, verify (or,
//                   for the reference, the shardings stripped)
//   export          the manifest, when a path is given
//   bufferize       one-shot bufferization, buckets started and waited
//                   for asynchronously, ZeRO-3's gathers prefetched,
//                   deallocation
//   lower           runtime calls, loops, LLVM dialect, packed entries
//
// A new phase is one more function here and, if it has options, one more
// group below, embedded in CompileOptions.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_PIPELINES_PIPELINES_H
#define PAR_PIPELINES_PIPELINES_H

#include "par/Codegen/CPU/Passes.h"
#include "par/Communication/Passes.h"
#include "par/Dialect/Par/Transforms/Passes.h"
#include "par/Pipelining/Passes.h"
#include "par/Training/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir::par {

//===----------------------------------------------------------------------===//
// Option groups
//===----------------------------------------------------------------------===//

/// Every option of the pipeline is declared once, in the group of the phase
/// that reads it. A group registers its options with the PassOptions that
/// embeds it: the whole pipeline's options (CompileOptions, par-compile's
/// --options and par-opt's --par-compile-pipeline) embed every group,
/// par-spmd's the communication group, par-lower-cpu's the kernel group, and
/// the phases take the groups. Defaults come from the passes' own options
/// (their Passes.td), so the pipeline and the passes run alone never
/// disagree.
class OptionGroup {
public:
  explicit OptionGroup(::mlir::detail::PassOptions &owner) : owner(owner) {}
  OptionGroup(const OptionGroup &) = delete;
  OptionGroup &operator=(const OptionGroup &) = delete;

protected:
  template <typename T>
  using Option = ::mlir::detail::PassOptions::Option<T>;
  template <typename T>
  using ListOption = ::mlir::detail::PassOptions::ListOption<T>;
  ::mlir::detail::PassOptions &owner;
};

/// Mixed precision and loss scaling (the precision phase: before
/// everything, the pipeline split cuts 16-bit activations).
struct PrecisionOptions : OptionGroup {
  using OptionGroup::OptionGroup;
  inline static const LossScaleOptions kScale{};

  Option<std::string> computeType{
      owner, "precision",
      llvm::cl::desc("f32 (as given), f16 or bf16: compute type of "
                     "par-mixed-precision, master weights stay f32"),
      llvm::cl::init("f32")};
  ListOption<std::string> keep{
      owner, "keep",
      llvm::cl::desc("Op kinds that stay f32 under mixed precision "
                     "(matmul, elementwise, reduction, softmax; none)")};
  Option<std::string> lossScale{
      owner, "loss-scale",
      llvm::cl::desc("none, static or dynamic loss scaling (par-loss-scale); "
                     "auto (default): dynamic for f16, none otherwise (bf16 "
                     "has f32's range)"),
      llvm::cl::init("auto")};
  Option<double> initScale{owner, "init-scale",
                           llvm::cl::desc("The first step's loss scale"),
                           llvm::cl::init(kScale.initScale)};
  Option<double> growthFactor{owner, "growth-factor",
                              llvm::cl::desc("Dynamic scaling: growth factor"),
                              llvm::cl::init(kScale.growthFactor)};
  Option<double> backoffFactor{
      owner, "backoff-factor",
      llvm::cl::desc("Dynamic scaling: back-off factor"),
      llvm::cl::init(kScale.backoffFactor)};
  Option<int64_t> growthInterval{
      owner, "growth-interval",
      llvm::cl::desc("Dynamic scaling: finite steps before growth"),
      llvm::cl::init(kScale.growthInterval)};
  Option<int64_t> hysteresis{
      owner, "hysteresis",
      llvm::cl::desc("Dynamic scaling: overflows tolerated before back-off"),
      llvm::cl::init(kScale.hysteresis)};
  Option<double> minScale{owner, "min-scale",
                          llvm::cl::desc("Dynamic scaling: the minimum scale"),
                          llvm::cl::init(kScale.minScale)};
};

/// The train step: autodiff and the optimizer (the train phase). The
/// micro-batch count also feeds the schedule: one value per concept.
struct TrainingOptions : OptionGroup {
  using OptionGroup::OptionGroup;
  inline static const OptimizerOptions kOpt{};

  Option<std::string> optimizer{
      owner, "optimizer",
      llvm::cl::desc("none (the program is compiled as given), sgd, "
                     "momentum or adamw: build the train step"),
      llvm::cl::init("none")};
  Option<double> lr{owner, "lr", llvm::cl::desc("Learning rate"),
                    llvm::cl::init(kOpt.lr)};
  Option<double> momentum{owner, "momentum",
                          llvm::cl::desc("Momentum coefficient"),
                          llvm::cl::init(kOpt.momentum)};
  Option<double> beta1{owner, "beta1", llvm::cl::desc("AdamW beta1"),
                       llvm::cl::init(kOpt.beta1)};
  Option<double> beta2{owner, "beta2", llvm::cl::desc("AdamW beta2"),
                       llvm::cl::init(kOpt.beta2)};
  Option<double> epsilon{owner, "eps", llvm::cl::desc("AdamW epsilon"),
                         llvm::cl::init(kOpt.epsilon)};
  Option<double> weightDecay{owner, "weight-decay",
                             llvm::cl::desc("AdamW decoupled weight decay"),
                             llvm::cl::init(kOpt.weightDecay)};
  Option<double> clipNorm{owner, "clip-norm",
                          llvm::cl::desc("Clip gradients to this global "
                                         "norm (0: off)"),
                          llvm::cl::init(kOpt.clipNorm)};
  Option<std::string> lrSchedule{
      owner, "lr-schedule",
      llvm::cl::desc("Learning-rate schedule: constant or cosine"),
      llvm::cl::init(kOpt.schedule)};
  Option<int64_t> warmupSteps{owner, "warmup-steps",
                              llvm::cl::desc("Linear warmup steps (cosine)"),
                              llvm::cl::init(kOpt.warmupSteps)};
  Option<int64_t> totalSteps{owner, "total-steps",
                             llvm::cl::desc("Steps of the cosine decay"),
                             llvm::cl::init(kOpt.totalSteps)};
  Option<int64_t> microBatches{
      owner, "micro-batches",
      llvm::cl::desc("Micro-batches per step (gradient accumulation, and "
                     "the pipeline schedule's m)"),
      llvm::cl::init(kOpt.microBatches)};
  Option<int64_t> zero{
      owner, "zero",
      llvm::cl::desc("ZeRO stage: 0, 1 (optimizer state and update "
                     "sharded over the data-parallel axes), 2 (gradients "
                     "too: the same program as 1), 3 (parameters too, "
                     "gathered at each use: FSDP); not with stages"),
      llvm::cl::init(kOpt.zero)};
  ListOption<std::string> zeroAxes{
      owner, "zero-axes",
      llvm::cl::desc("zero>=1: the mesh axes to shard the optimizer state "
                     "over (default: those the data's dim 0 is split over)")};
  Option<bool> zeroPrefetch{
      owner, "zero-prefetch",
      llvm::cl::desc("zero=3: start each group of parameter gathers while "
                     "the previous group's parameters are in use, waiting "
                     "right before the first use (par-zero-prefetch; off: "
                     "blocking gathers at the use)"),
      llvm::cl::init(true)};
  Option<std::string> recompute{
      owner, "recompute",
      llvm::cl::desc("Activation recomputation (par-recompute): none, "
                     "selective (attention cores: QK^T, mask, softmax) or "
                     "full (each layer from its saved input)"),
      llvm::cl::init("none")};
  ListOption<std::string> recomputeLayers{
      owner, "recompute-layers",
      llvm::cl::desc("The layers recompute acts on: indices and inclusive "
                     "ranges, e.g. 0,2-3 (default: all)")};
};

/// Pipeline parallelism: the split into stages and their schedule (the
/// pipeline split and schedule phases).
struct PipeliningOptions : OptionGroup {
  using OptionGroup::OptionGroup;
  inline static const PipelineScheduleOptions kSched{};

  Option<int64_t> stages{owner, "stages",
                         llvm::cl::desc("Pipeline stages (0: no pipeline)"),
                         llvm::cl::init(0)};
  Option<std::string> schedule{
      owner, "schedule",
      llvm::cl::desc("Pipeline schedule: gpipe, 1f1b, interleaved, zbh1, "
                     "zbv"),
      llvm::cl::init(kSched.schedule)};
  Option<int64_t> virtualStages{
      owner, "virtual",
      llvm::cl::desc("Stages per pipeline rank (interleaved; 2 for zbv)"),
      llvm::cl::init(kSched.virtualStages)};
  Option<std::string> pipelineAxis{
      owner, "pipeline-axis", llvm::cl::desc("The mesh axis of the stages"),
      llvm::cl::init(kSched.axis)};
  Option<bool> splitBackward{
      owner, "split-backward",
      llvm::cl::desc("Split each stage backward into input and weight "
                     "halves (implied by schedule=zbh1 and zbv)"),
      llvm::cl::init(false)};
};

/// The communication of the partitioned program (the spmd phase): where
/// partial values are reduced, in which type, compressed or not, in which
/// buckets.
struct CommunicationOptions : OptionGroup {
  using OptionGroup::OptionGroup;
  inline static const BucketReductionsOptions kBucket{};
  inline static const CompressGradientsOptions kCompress{};
  inline static const SequenceParallelOptions kSeq{};

  Option<bool> sequenceParallel{
      owner, "sequence-parallel",
      llvm::cl::desc("Megatron sequence parallelism (par-sequence-parallel): "
                     "LayerNorm, residual and dropout activations split along "
                     "the sequence over the tensor-parallel axis, its "
                     "all_reduces become reduce_scatter + all_gather"),
      llvm::cl::init(false)};
  Option<std::string> sequenceParallelAxis{
      owner, "sequence-parallel-axis",
      llvm::cl::desc("sequence-parallel: the tensor-parallel mesh axis"),
      llvm::cl::init(kSeq.axis)};

  Option<bool> stash{
      owner, "stash",
      llvm::cl::desc("Pipelined training: each stage's forward keeps the "
                     "values its backward reads (par-pipeline-stash), so the "
                     "backward does not recompute the forward (default "
                     "true; false: it does, holding only the stage input)"),
      llvm::cl::init(true)};

  Option<std::string> gradReduce{
      owner, "grad-reduce",
      llvm::cl::desc("Mixed precision: reduce data-parallel gradients in f32 "
                     "(default, Megatron's) or in the compute type (half "
                     "the bytes, as DDP's fp16/bf16 hooks)"),
      llvm::cl::init("f32")};
  Option<bool> sinkReductions{
      owner, "sink-reductions",
      llvm::cl::desc("Reduce partial values after the linear ops that use "
                     "them (one reduction for several, micro-batch "
                     "gradients reduced once per step; default true)"),
      llvm::cl::init(true)};
  Option<int64_t> bucketBytes{
      owner, "bucket-bytes",
      llvm::cl::desc("Data-parallel gradients and other all-reduces of one "
                     "group are sent in buckets of at most this many local "
                     "bytes, each one message started asynchronously "
                     "(DDP's 25 MiB by default; 0: one blocking message "
                     "per all-reduce)"),
      llvm::cl::init(kBucket.bucketBytes)};
  Option<std::string> compress{
      owner, "compress",
      llvm::cl::desc("Compress the data-parallel gradient reductions "
                     "(par-compress-gradients): none (default), int8, sign "
                     "or topk"),
      llvm::cl::init("none")};
  Option<double> compressRatio{
      owner, "compress-ratio",
      llvm::cl::desc("topk: the fraction of each bucket's elements sent"),
      llvm::cl::init(kCompress.ratio)};
  Option<int64_t> compressChunk{
      owner, "compress-chunk",
      llvm::cl::desc("int8, sign: elements per scale"),
      llvm::cl::init(kCompress.chunk)};
  Option<bool> errorFeedback{
      owner, "error-feedback",
      llvm::cl::desc("Compression keeps what it dropped and adds it back "
                     "the next step (default true)"),
      llvm::cl::init(kCompress.errorFeedback)};
  Option<int64_t> compressMinElements{
      owner, "compress-min-elements",
      llvm::cl::desc("Gradients with fewer elements stay uncompressed"),
      llvm::cl::init(kCompress.minElements)};
  Option<int64_t> compressWarmup{
      owner, "compress-warmup",
      llvm::cl::desc("Steps reduced uncompressed before compression starts"),
      llvm::cl::init(kCompress.warmup)};
};

/// The CPU kernels (the bufferize and lower phases of a CPU program;
/// docs/RationaleCPUKernels.md).
struct CPUKernelOptions : OptionGroup {
  using OptionGroup::OptionGroup;
  inline static const FastMathOptions kFast{};

  Option<bool> fuseReductions{
      owner, "fuse-reductions",
      llvm::cl::desc("CPU: tile chains with reductions (LayerNorm, softmax, "
                     "cross-entropy, their backwards) into one loop nest each "
                     "(par-fuse-reductions)"),
      llvm::cl::init(true)};
  Option<bool> fpReassociate{
      owner, "fp-reassociate",
      llvm::cl::desc("CPU: reassociate float reductions so they vectorise "
                     "(par-fast-math reassociate; off: sequential sums)"),
      llvm::cl::init(kFast.reassociate)};
  Option<bool> mathApprox{
      owner, "math-approx",
      llvm::cl::desc("CPU: f32 exp/log/tanh as vectorisable polynomial "
                     "approximations (par-fast-math approximate; off: libm)"),
      llvm::cl::init(kFast.approximate)};
  Option<bool> outlineKernels{
      owner, "outline-kernels",
      llvm::cl::desc("CPU: every kernel a function, identical ones once "
                     "(par-outline-kernels; off: one flat function per "
                     "entry, compiled per copy)"),
      llvm::cl::init(true)};
};

/// Where the sharded program runs, as written; parseTarget makes it a
/// TargetSpec, which is what every user takes.
struct TargetOptions : OptionGroup {
  using OptionGroup::OptionGroup;

  Option<std::string> name{
      owner, "target",
      llvm::cl::desc("cpu, or cuda[:CHIP] (default chip sm_90): kernels "
                     "through NVVM to a fatbin, matmuls on cuBLAS, "
                     "collectives on NCCL; the reference stays a CPU program"),
      llvm::cl::init("cpu")};
};

//===----------------------------------------------------------------------===//
// The target
//===----------------------------------------------------------------------===//

/// The cuda target's code generation: where the kernels' binary comes from.
/// The toolkit path is always passed to the serializer (Debian's MLIR has
/// none compiled in; without it libdevice is not linked).
struct GPUTargetOptions {
  std::string chip = "sm_90";
  std::string features = "+ptx80";
  std::string toolkit = "/usr/local/cuda";
  std::string format = "fatbin"; // gpu-module-to-binary: isa, bin, fatbin
  int64_t blockSize = 256;       // par-gpu-map-linalg's block-size
};

/// A target, parsed and checked (parseTarget): what the lowering, the
/// manifest and par-compile's linking read.
struct TargetSpec {
  enum class Kind { CPU, CUDA };
  Kind kind = Kind::CPU;
  GPUTargetOptions gpu; // Kind::CUDA: the chip and its code generation

  bool isCuda() const { return kind == Kind::CUDA; }
  /// As the manifest spells it: "cpu" or "cuda:<chip>".
  std::string str() const;
};

/// Parses a target: "cpu", "cuda" or "cuda:<chip>" (sm_NN, NN >= 70).
/// Failure, with `error` saying why, for anything else.
FailureOr<TargetSpec> parseTarget(llvm::StringRef target, std::string &error);

//===----------------------------------------------------------------------===//
// The pipelines' options
//===----------------------------------------------------------------------===//

/// Options of the whole pipeline (`par-compile --options=...`,
/// `par-opt --par-compile-pipeline=...`): every group, plus the reports and
/// outputs.
struct CompileOptions : public PassPipelineOptions<CompileOptions> {
  PrecisionOptions precision{*this};
  TrainingOptions training{*this};
  PipeliningOptions pipelining{*this};
  CommunicationOptions communication{*this};
  CPUKernelOptions kernels{*this};
  TargetOptions target{*this};

  // Reports and outputs.
  Option<bool> report{*this, "report",
                      llvm::cl::desc("Print the stage split, the "
                                     "recomputation, the schedule diagram "
                                     "and the optimizer state's layout and "
                                     "bytes"),
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
  Option<std::string> memoryLimit{
      *this, "memory-limit",
      llvm::cl::desc("Warn when a function's memory plan needs more than "
                     "this per device (e.g. 80GiB, 512MiB; bytes without a "
                     "unit) and name the options that would bring it under"),
      llvm::cl::init("")};
  Option<bool> reference{
      *this, "reference",
      llvm::cl::desc("Build the unsharded reference: shardings stripped "
                     "instead of partitioned"),
      llvm::cl::init(false)};
};

/// Checks `options` as a whole, for both entry points (par-compile and
/// par-compile-pipeline): the target parsed once, and the combinations no
/// lowering supports refused. Returns the target's spec, or failure with
/// `error` saying why.
FailureOr<TargetSpec> checkCompileOptions(const CompileOptions &options,
                                          std::string &error);

/// Options of `par-spmd`.
struct SPMDPipelineOptions
    : public PassPipelineOptions<SPMDPipelineOptions> {
  CommunicationOptions communication{*this};
  Option<bool> report{*this, "report",
                      llvm::cl::desc("Print the communication report"),
                      llvm::cl::init(false)};
};

/// Options of `par-lower-cpu`.
struct LowerCPUPipelineOptions
    : public PassPipelineOptions<LowerCPUPipelineOptions> {
  CPUKernelOptions kernels{*this};
  Option<bool> report{*this, "report",
                      llvm::cl::desc("par-outline-kernels report"),
                      llvm::cl::init(false)};
};

/// Options of `par-lower-gpu`: a cuda target's code generation, spelled
/// out (the pipeline spells it target=cuda:CHIP).
struct LowerGPUPipelineOptions
    : public PassPipelineOptions<LowerGPUPipelineOptions> {
  inline static const GPUTargetOptions kGPU{};
  Option<std::string> chip{*this, "chip", llvm::cl::desc("CUDA chip"),
                           llvm::cl::init(kGPU.chip)};
  Option<std::string> features{*this, "features",
                               llvm::cl::desc("PTX features"),
                               llvm::cl::init(kGPU.features)};
  Option<std::string> toolkit{
      *this, "toolkit", llvm::cl::desc("CUDA toolkit (libdevice, ptxas)"),
      llvm::cl::init(kGPU.toolkit)};
  Option<std::string> format{
      *this, "format",
      llvm::cl::desc("Kernel binary: isa (PTX), bin (cubin), fatbin"),
      llvm::cl::init(kGPU.format)};
  Option<int64_t> blockSize{*this, "block-size",
                            llvm::cl::desc("Threads per block"),
                            llvm::cl::init(kGPU.blockSize)};
  GPUTargetOptions get() const {
    return {chip, features, toolkit, format, blockSize};
  }
};

/// One program built from the front half's result: what differs between an
/// artifact's sharded program and its unsharded reference.
struct ProgramOptions {
  TargetSpec target;         // where it runs (a reference: the CPU)
  bool reference = false;    // shardings stripped instead of partitioned
  std::string manifest;      // manifest path ("": none)
  bool commReport = false;   // par-comm-report
  bool kernelReport = false; // par-outline-kernels' kernel counts
  bool memoryReport = false; // par-memory-plan's report
  int64_t memoryLimit = 0;   // bytes per device to warn above (0: none)
};

/// The program `options` describe, on `target` (checkCompileOptions').
ProgramOptions getProgramOptions(const CompileOptions &options,
                                 const TargetSpec &target);

//===----------------------------------------------------------------------===//
// Phases and pipelines
//===----------------------------------------------------------------------===//

/// Propagation, partitioning, cleanup, the communication passes and the
/// stage's verify pass; `report`: the communication report.
void buildSPMDPipeline(OpPassManager &pm, const CommunicationOptions &comm,
                       bool report = false);

/// The phases, each usable alone.
void buildPrecisionPhase(OpPassManager &pm, const CompileOptions &options);
void buildPipelineSplitPhase(OpPassManager &pm, const CompileOptions &options);
void buildTrainPhase(OpPassManager &pm, const CompileOptions &options);
void buildSchedulePhase(OpPassManager &pm, const CompileOptions &options);
/// Partitioning (buildSPMDPipeline) or, for a reference, the shardings
/// stripped.
void buildSPMDPhase(OpPassManager &pm, const CommunicationOptions &comm,
                    const ProgramOptions &program);
void buildExportPhase(OpPassManager &pm, const ProgramOptions &program);
/// The memory plan of the bufferized program (par-memory-plan): stored in
/// the manifest, reported, checked against the limit.
void buildMemoryPlanPhase(OpPassManager &pm, const ProgramOptions &program);
/// `outParams`: results become trailing out-parameters written in place
/// (the cuda target's calling convention; the CPU returns buffers).
/// `kernels` (CPU only): the tensor-level kernel passes (fusion with
/// reductions, fast math) after elementwise fusion. `zeroPrefetch`: ZeRO-3's
/// parameter gathers started one group ahead (par-zero-prefetch).
void buildBufferizePhase(OpPassManager &pm, bool outParams = false,
                         const CPUKernelOptions *kernels = nullptr,
                         bool zeroPrefetch = true);
/// `outlineKernels`: every kernel a function (`report`: their counts).
void buildLowerCPUPhase(OpPassManager &pm, bool outlineKernels = true,
                        bool report = false);
/// Buffers to kernels (par-gpu-map-linalg), device memory, collectives and
/// matmuls as runtime calls (NCCL, cuBLAS), then host and device code to
/// the LLVM dialect with the kernels serialized into the module.
void buildLowerGPUPhase(OpPassManager &pm, const GPUTargetOptions &options);

/// Bufferization and lowering of a partitioned program to the LLVM dialect
/// for the CPU (buildBufferizePhase + buildLowerCPUPhase).
void buildLowerCPUPipeline(OpPassManager &pm, const CPUKernelOptions &kernels,
                           bool report = false);
/// The same for the cuda target (buildBufferizePhase with out-parameters +
/// buildLowerGPUPhase).
void buildLowerGPUPipeline(OpPassManager &pm, const GPUTargetOptions &options);

/// The front half (normalize, precision, split, train, schedule): what the
/// sharded program and its reference share.
void buildFrontendPipeline(OpPassManager &pm, const CompileOptions &options);
/// The back half of one program: spmd (or strip) into `spmd`, then export,
/// bufferize and lower for the program's target into `lower`. par-compile
/// runs them one after the other and writes the partitioned program in
/// between; a single pipeline passes the same pass manager twice.
void buildBackendPipeline(OpPassManager &spmd, OpPassManager &lower,
                          const CompileOptions &options,
                          const ProgramOptions &program);
/// Everything: a model in, the LLVM dialect out (par-compile-pipeline), on
/// the target checkCompileOptions returned for `options`.
void buildCompilePipeline(OpPassManager &pm, const CompileOptions &options,
                          const TargetSpec &target);

/// Registers `par-spmd`, `par-lower-cpu`, `par-lower-gpu` and
/// `par-compile-pipeline` (which refuses what checkCompileOptions refuses).
void registerParPipelines();

} // namespace mlir::par

#endif // PAR_PIPELINES_PIPELINES_H

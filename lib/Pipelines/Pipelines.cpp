//===- Pipelines.cpp - par's pass pipelines -------------------------------===//
//
// See Pipelines.h. Every step is a typed pass creation with the reason it
// sits where it does.
//
//===----------------------------------------------------------------------===//

#include "par/Pipelines/Pipelines.h"
#include "par/Support/ByteSize.h"
#include "par/Codegen/CPU/Passes.h"
#include "par/Codegen/GPU/Passes.h"
#include "par/Communication/Passes.h"
#include "par/Conversion/ParToRuntime/Passes.h"
#include "par/Dialect/Par/Transforms/Passes.h"
#include "par/Frontend/Passes.h"
#include "par/Pipelining/Passes.h"
#include "par/Pipelining/Schedule.h"
#include "par/Target/Manifest/Passes.h"
#include "par/Training/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::par;

//===----------------------------------------------------------------------===//
// The target and the options' checks
//===----------------------------------------------------------------------===//

std::string mlir::par::TargetSpec::str() const {
  return isCuda() ? "cuda:" + gpu.chip : "cpu";
}

FailureOr<TargetSpec> mlir::par::parseTarget(StringRef target,
                                             std::string &error) {
  TargetSpec spec;
  if (target == "cpu")
    return spec;
  spec.kind = TargetSpec::Kind::CUDA;
  if (target == "cuda")
    return spec; // the default chip
  if (!target.consume_front("cuda:")) {
    error = "unknown target '" + target.str() +
            "' (expected cpu, cuda or cuda:sm_NN)";
    return failure();
  }
  unsigned sm;
  if (!target.starts_with("sm_") || target.drop_front(3).getAsInteger(10, sm) ||
      sm < 70) {
    error = "unknown cuda chip '" + target.str() +
            "' (expected sm_NN with NN >= 70, e.g. sm_90)";
    return failure();
  }
  spec.gpu.chip = target.str();
  return spec;
}

FailureOr<TargetSpec>
mlir::par::checkCompileOptions(const CompileOptions &options,
                               std::string &error) {
  FailureOr<TargetSpec> target = parseTarget(options.target.name, error);
  if (failed(target))
    return failure();
  // Top-k selects with loops over single elements on the host.
  if (target->isCuda() && options.communication.compress == "topk") {
    error = "compress=topk has no cuda lowering (its radix select updates "
            "tensors element by element in host loops); use compress=int8 "
            "or compress=sign with --target cuda";
    return failure();
  }
  if (!options.memoryLimit.empty() &&
      ::par::parseByteSize(options.memoryLimit) < 0) {
    error = "memory-limit='" + options.memoryLimit +
            "' is not a size (bytes, or a number with K, M, G or T, e.g. "
            "80GiB)";
    return failure();
  }
  // The reduce_scatters into the sequence-split region are a row-parallel
  // output's all_reduce and slice merged by par-sink-reductions.
  if (options.communication.sequenceParallel &&
      !options.communication.sinkReductions) {
    error = "sequence-parallel=true needs sink-reductions=true (it merges "
            "each all_reduce and slice into the region into one "
            "reduce_scatter)";
    return failure();
  }
  // Recomputation rewrites par-autodiff's backward: there is none without
  // a train step.
  if (options.training.recompute != "none" &&
      options.training.optimizer == "none") {
    error = "recompute=" + options.training.recompute.getValue() +
            " needs a train step (optimizer=sgd, momentum or adamw): it "
            "changes what the backward recomputes";
    return failure();
  }
  return target;
}

ProgramOptions mlir::par::getProgramOptions(const CompileOptions &options,
                                            const TargetSpec &target) {
  ProgramOptions program;
  program.target = target;
  program.reference = options.reference;
  program.manifest = options.manifest;
  program.commReport = options.commReport;
  program.kernelReport = options.report;
  program.memoryReport = options.report;
  if (!options.memoryLimit.empty())
    program.memoryLimit =
        std::max<int64_t>(0, ::par::parseByteSize(options.memoryLimit));
  return program;
}

//===----------------------------------------------------------------------===//
// Phases
//===----------------------------------------------------------------------===//

void mlir::par::buildSPMDPipeline(OpPassManager &pm,
                                  const CommunicationOptions &options,
                                  bool report) {
  // Cheap shared tensors (empty, fill, splat) get one copy per use, so that
  // one shared init does not force one sharding on all its users.
  pm.addPass(createSplitConstants());
  // Propagation needs the whole unsharded program to see every annotation
  // and every op's rule.
  pm.addPass(createShardingPropagation());
  // Sequence parallelism reads the tensor-parallel layout propagation
  // decided, splits the activations between its reductions along the
  // sequence and propagates again.
  if (options.sequenceParallel) {
    SequenceParallelOptions sp;
    sp.axis = options.sequenceParallelAxis;
    pm.addPass(createSequenceParallel(sp));
  }
  // A pipelined program's stage backwards split at the values their
  // adjoints read, on the propagated program: both sides of a residual
  // carry the sharding propagation (and sequence parallelism) chose.
  if (options.stash)
    pm.addPass(createPipelineStash());
  // Partitioning reads propagation's shardings and makes types local.
  pm.addPass(createPartition());
  // Cleanup: fold what partitioning left (e.g. casts, duplicate constants).
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // A split table's rows compared by their local index (the one-hot form
  // the CPU lowering gathers and scatters).
  pm.addPass(createLocalRowIndex());
  // Partial values flow through linear ops: one reduction where several
  // were (q/k/v input gradients, micro-batch gradients), on the narrowest
  // tensor; before the gradient reductions change type below.
  if (options.sinkReductions) {
    SinkReductionsOptions sink;
    sink.narrowDataParallel = options.gradReduce == "compute";
    // Compression rewrites the step's reductions: every gradient is
    // reduced there.
    sink.stepGradients = options.compress != "none";
    pm.addPass(createSinkReductions(sink));
  }
  // Mixed precision's data-parallel gradients in 16 bits, if asked: on the
  // partitioned program, where the reductions are.
  if (options.gradReduce == "compute")
    pm.addPass(createGradientReducePrecision());
  // Gradient compression: on the data-parallel gradient reductions in
  // their final type, before the remaining all-reduces are bucketed.
  if (options.compress != "none") {
    CompressGradientsOptions cg;
    cg.method = options.compress;
    cg.ratio = options.compressRatio;
    cg.chunk = options.compressChunk;
    cg.errorFeedback = options.errorFeedback;
    cg.minElements = options.compressMinElements;
    cg.warmup = options.compressWarmup;
    cg.bucketBytes = options.bucketBytes;
    pm.addPass(createCompressGradients(cg));
  }
  // Buckets (DDP) and the all-reduce combiner (XLA): on the final
  // reductions, after their element types are settled (a bucket has one).
  if (options.bucketBytes != 0) {
    BucketReductionsOptions bucket;
    bucket.bucketBytes = options.bucketBytes;
    pm.addPass(createBucketReductions(bucket));
  }
  // The stage's contract.
  pm.addPass(createVerifySPMD());
  if (report)
    pm.addPass(createCommReport());
}

/// The loss-scaling policy `options` asks for ("" for none).
static std::string lossScalePolicy(const PrecisionOptions &options) {
  // Anything else reaches par-loss-scale, which names what it takes.
  if (options.lossScale == "auto")
    return options.computeType == "f16" ? "dynamic" : "";
  return options.lossScale == "none" ? "" : options.lossScale.getValue();
}

void mlir::par::buildPrecisionPhase(OpPassManager &pm,
                                    const CompileOptions &options) {
  // On the whole unsharded forward, before the pipeline split (which then
  // cuts 16-bit activations) and before autodiff (the casts' adjoints make
  // the master weights' gradients f32).
  const PrecisionOptions &precision = options.precision;
  if (precision.computeType != "f32") {
    MixedPrecisionOptions mp;
    mp.computeType = precision.computeType;
    mp.keep.assign(precision.keep.begin(), precision.keep.end());
    pm.addPass(createMixedPrecision(mp));
  }
  // The loss scale seeds the backward (before autodiff) of the whole
  // forward (before the split: only the last stage reads it).
  std::string policy = lossScalePolicy(precision);
  if (policy.empty() || options.training.optimizer == "none")
    return;
  LossScaleOptions ls;
  ls.policy = policy;
  ls.initScale = precision.initScale;
  ls.growthFactor = precision.growthFactor;
  ls.backoffFactor = precision.backoffFactor;
  ls.growthInterval = precision.growthInterval;
  ls.hysteresis = precision.hysteresis;
  ls.minScale = precision.minScale;
  pm.addPass(createLossScale(ls));
}

void mlir::par::buildPipelineSplitPhase(OpPassManager &pm,
                                        const CompileOptions &options) {
  const PipeliningOptions &pipelining = options.pipelining;
  if (pipelining.stages <= 0)
    return;
  // Before autodiff: the stage functions are forwards, each differentiated
  // on its own, so every stage's backward lives with its forward.
  PipelineSplitOptions split;
  split.stages = pipelining.stages;
  split.report = options.report;
  // zbh1 and zbv imply the split (what the schedule library says of them).
  ::par::pipeline::PipelineShape implied;
  ::par::pipeline::ScheduleKind kind;
  if (::par::pipeline::parseScheduleKind(pipelining.schedule, kind))
    ::par::pipeline::applyScheduleKind(kind, implied);
  split.splitBackward = pipelining.splitBackward || implied.splitBackward;
  pm.addPass(createPipelineSplit(split));
}

void mlir::par::buildTrainPhase(OpPassManager &pm,
                                const CompileOptions &options) {
  const TrainingOptions &training = options.training;
  if (training.optimizer == "none")
    return;
  // Reverse mode on the unsharded program: the backward is sharded later
  // by the same propagation as the forward.
  pm.addPass(createAutodiff());
  // Right after autodiff, while the gradient functions are the forward
  // then the backward: which forward values the backward reads (saved)
  // and which it recomputes. Before the optimizer, which calls them.
  if (training.recompute != "none") {
    RecomputeOptions rc;
    rc.policy = training.recompute;
    rc.layers.assign(training.recomputeLayers.begin(),
                     training.recomputeLayers.end());
    rc.report = options.report;
    pm.addPass(createRecompute(rc));
  }
  OptimizerOptions opt;
  opt.optimizer = training.optimizer;
  opt.lr = training.lr;
  opt.momentum = training.momentum;
  opt.beta1 = training.beta1;
  opt.beta2 = training.beta2;
  opt.epsilon = training.epsilon;
  opt.weightDecay = training.weightDecay;
  opt.clipNorm = training.clipNorm;
  opt.schedule = training.lrSchedule;
  opt.warmupSteps = training.warmupSteps;
  opt.totalSteps = training.totalSteps;
  opt.microBatches = training.microBatches;
  opt.zero = training.zero;
  opt.zeroAxes.assign(training.zeroAxes.begin(), training.zeroAxes.end());
  opt.report = options.report;
  pm.addPass(createOptimizer(opt));
}

void mlir::par::buildSchedulePhase(OpPassManager &pm,
                                   const CompileOptions &options) {
  const PipeliningOptions &pipelining = options.pipelining;
  if (pipelining.stages <= 0)
    return;
  // After the optimizer: the schedule orders the stage functions' forwards,
  // backwards and updates, with the step's micro-batch count.
  PipelineScheduleOptions sched;
  sched.schedule = pipelining.schedule;
  sched.microBatches = options.training.microBatches;
  sched.virtualStages = pipelining.virtualStages;
  sched.axis = pipelining.pipelineAxis;
  sched.diagram = options.report;
  pm.addPass(createPipelineSchedule(sched));
}

void mlir::par::buildSPMDPhase(OpPassManager &pm,
                               const CommunicationOptions &comm,
                               const ProgramOptions &program) {
  if (!program.reference) {
    buildSPMDPipeline(pm, comm, program.commReport);
    return;
  }
  // The unsharded reference: the same program on one device, annotations
  // dropped; split constants and cleanup as the sharded path has them.
  pm.addPass(createStripShardings());
  pm.addPass(createSplitConstants());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void mlir::par::buildExportPhase(OpPassManager &pm,
                                 const ProgramOptions &program) {
  if (program.manifest.empty())
    return;
  // The runner keeps one buffer set for parameters and optimizer state: the
  // train step and the stage updates write them in place (the manifest
  // says which results). The CPU target's: the GPU program's results are
  // out-parameters the runtime stages through device copies.
  if (!program.target.isCuda())
    pm.addPass(createDonateBuffers());
  // On tensors, before bufferization: the manifest reads every argument's
  // global type, local type and sharding.
  ExportManifestOptions exp;
  exp.outputFile = program.manifest;
  exp.target = program.target.str();
  pm.addPass(createExportManifest(exp));
}

void mlir::par::buildMemoryPlanPhase(OpPassManager &pm,
                                     const ProgramOptions &program) {
  // After bufferization: the buffers are the program's (docs/
  // RationaleMemory.md); the manifest, written on tensors, gets the plans.
  MemoryPlanOptions plan;
  plan.manifest = program.manifest;
  plan.report = program.memoryReport;
  plan.limit = program.memoryLimit;
  pm.addPass(createMemoryPlan(plan));
}

void mlir::par::buildBufferizePhase(OpPassManager &pm, bool outParams,
                                    const CPUKernelOptions *kernels,
                                    bool zeroPrefetch) {
  // Entry points get C interfaces first (func-to-LLVM reads the attribute).
  pm.addPass(createMarkEntryPoints());
  // Aggregated linalg ops (softmax) become generics the later steps handle.
  pm.addPass(createDecomposeAggregatedOps());
  pm.addNestedPass<func::FuncOp>(createConvertElementwiseToLinalgPass());
  // Elementwise chains become one generic each: one loop nest, no
  // temporaries between them.
  pm.addPass(createFuseElementwise());
  if (kernels) {
    // Chains with reductions (LayerNorm, softmax, cross-entropy, their
    // backwards) one loop nest each, over blocks of rows; cleanup folds
    // the loops the yields of multi-use producers replaced.
    if (kernels->fuseReductions) {
      pm.addPass(createFuseReductions());
      pm.addPass(createCanonicalizerPass());
      pm.addPass(createCSEPass());
    }
    // The licences that let LLVM vectorise the loops (reductions
    // reassociated, exp/log/tanh as polynomials).
    FastMathOptions fast;
    fast.reassociate = kernels->fpReassociate;
    fast.approximate = kernels->mathApprox;
    if (fast.reassociate || fast.approximate)
      pm.addPass(createFastMath(fast));
  }
  // Collectives bufferize through their models (to their buffer forms);
  // function boundaries get contiguous memrefs, which the runtime's
  // pointer-based ABI and the packed entry points rely on.
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  bufferize.allowReturnAllocsFromLoops = true;
  // Donated results written into their arguments (again: elementwise
  // fusion gives the generics fresh inits).
  pm.addPass(createDonateBuffers());
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  // Donated results returned in their arguments' buffers.
  pm.addPass(createReturnDonated());
  if (outParams) {
    // Results as trailing out-parameters: a result allocated in the
    // function is the caller's buffer from the start (no copy); one that
    // is an argument or another result is copied in.
    bufferization::BufferResultsToOutParamsPassOptions out;
    out.hoistStaticAllocs = true;
    out.modifyPublicFunctions = true;
    pm.addPass(bufferization::createBufferResultsToOutParamsPass(out));
    pm.addPass(createCanonicalizerPass());
  }
  // Buckets start where they are and are waited for before the first access
  // to their buffers: on buffers (where accesses and aliases are explicit)
  // and before deallocation, whose frees then follow the waits.
  pm.addPass(createAsyncCollectives());
  // ZeRO-3's parameter gathers started one group ahead, waited for before
  // the first use; also before deallocation, so that the gathered copy is
  // live (and planned) from its start.
  if (zeroPrefetch)
    pm.addPass(createZeroPrefetch());
  // Every temporary is freed; returned buffers belong to the caller. This
  // is upstream's buffer deallocation pipeline with par-split-deallocs
  // before the simplification, whose pairwise alias proofs would otherwise
  // grow with the square of the depth (one dealloc of every buffer at the
  // end of the step, retaining every returned one).
  memref::ExpandReallocPassOptions realloc;
  realloc.emitDeallocs = false;
  pm.addPass(memref::createExpandReallocPass(realloc));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(bufferization::createOwnershipBasedBufferDeallocationPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createSplitDeallocs());
  pm.addPass(bufferization::createBufferDeallocationSimplificationPass());
  // Each temporary freed after its last use, not at the end of the step:
  // the peak is then the live set's, which the memory plan predicts.
  pm.addPass(createDeallocAfterLastUse());
  pm.addPass(bufferization::createLowerDeallocationsPass());
  pm.addPass(createCSEPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createConvertBufferizationToMemRefPass());
  // The donated results back (returning their arguments).
  ReturnDonatedOptions restore;
  restore.restore = true;
  pm.addPass(createReturnDonated(restore));
}

void mlir::par::buildLowerCPUPhase(OpPassManager &pm, bool outlineKernels,
                                   bool report) {
  // Buffer collectives become runtime kernel calls; matmuls take the BLAS
  // path before the remaining linalg becomes loops.
  pm.addPass(createCollectivesToRuntime());
  pm.addPass(createMatmulToRuntime());
  // Every remaining kernel a function, identical ones (the layers') once:
  // LLVM then optimises and generates each distinct kernel once, and the
  // compile time stops growing with the depth (RationaleCPUKernels.md).
  if (outlineKernels) {
    OutlineKernelsOptions outline;
    outline.report = report;
    pm.addPass(createOutlineKernels(outline));
  }
  // Embedding gradients (one-hot row accumulations) as scatter-adds: rows
  // x fewer iterations, the same bits.
  pm.addPass(createOneHotToScatter());
  // The remaining linalg ops to loops; the big ones' outer parallel loops
  // and the fused chains' foralls shared by the rank's threads (OpenMP,
  // OMP_NUM_THREADS: par-run --threads).
  pm.addPass(createParallelizeLoops());
  pm.addPass(createConvertSCFToOpenMPPass());
  // convert-scf-to-openmp wraps each loop body in a memref.alloca_scope;
  // without allocas inside, canonicalization inlines it (scf-to-cf would
  // otherwise give the scope blocks it may not have).
  pm.addPass(createCanonicalizerPass());
  // tanh (GELU) as exp-based arithmetic: the math conversions below would
  // call libm's tanhf per element; the other math ops keep LLVM intrinsics.
  math::MathExpandOpsPassOptions expand;
  expand.opMnemonics = {"tanh"};
  pm.addNestedPass<func::FuncOp>(math::createMathExpandOpsPass(expand));
  // The standard conversions to the LLVM dialect.
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  // Reshapes of buffers with dynamic strides (an scf.if's result) leave
  // affine.apply for their strides.
  pm.addPass(createLowerAffinePass());
  // Buffers from the runtime's pool (_mlir_memref_to_llvm_aligned_alloc/
  // free, lib/Runtime/core/Allocator.cpp): no malloc per intermediate per
  // step. Aligned allocation asks the pool for the buffer's bytes (the
  // other lowering adds the alignment to every size), so a result the
  // program allocated is a block of exactly its size, which a session takes
  // over as the result's buffer (par_function_call_new).
  FinalizeMemRefToLLVMConversionPassOptions memrefToLLVM;
  memrefToLLVM.useGenericFunctions = true;
  memrefToLLVM.useAlignedAlloc = true;
  pm.addPass(createFinalizeMemRefToLLVMConversionPass(memrefToLLVM));
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertOpenMPToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  // One packed wrapper per entry point: what the session API calls.
  pm.addPass(createEmitPackedEntry());
}

void mlir::par::buildLowerGPUPhase(OpPassManager &pm,
                                   const GPUTargetOptions &options) {
  // Contiguous matmuls to cuBLAS through the runtime's kernel ABI, as on
  // the CPU (to BLAS).
  // A zero fill of C right before a GEMM folds into it (beta = 0).
  MatmulToRuntimeOptions matmul;
  matmul.foldZeroFill = true;
  pm.addPass(createMatmulToRuntime(matmul));
  math::MathExpandOpsPassOptions expand;
  expand.opMnemonics = {"tanh"};
  pm.addNestedPass<func::FuncOp>(math::createMathExpandOpsPass(expand));
  // Every other structured op (copies included) one kernel; every buffer
  // of the program device memory.
  MapLinalgToGPUOptions map;
  map.blockSize = options.blockSize;
  pm.addPass(createMapLinalgToGPU(map));
  pm.addPass(createDeviceMemory());
  // Collectives to NCCL through the same kernel ABI; after the device
  // memory rewrite, since their member tables are host arrays.
  pm.addPass(createCollectivesToRuntime());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // Kernels outlined into gpu.modules; launches, allocations and copies of
  // each function chained on one stream (the runtime's: no synchronization
  // per launch, one at the function's end).
  pm.addPass(createGpuLaunchSinkIndexComputationsPass());
  pm.addPass(createGpuKernelOutliningPass());
  pm.addPass(createMergeKernelModules());
  pm.addNestedPass<func::FuncOp>(createGpuAsyncRegionPass());
  pm.addNestedPass<func::FuncOp>(createStreamOrder());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  GpuNVVMAttachTargetOptions attach;
  attach.chip = options.chip;
  attach.features = options.features;
  attach.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(attach));
  // Device code: the gpu dialect to NVVM (gpu.all_reduce to shuffles and
  // shared memory). Kernels take full memref descriptors (bare pointers
  // would need static strides everywhere, and both sides must agree).
  OpPassManager &dev = pm.nest<gpu::GPUModuleOp>();
  dev.addPass(createStripDebugInfoPass());
  dev.addPass(createConvertGpuOpsToNVVMOps());
  dev.addPass(createCanonicalizerPass());
  dev.addPass(createCSEPass());
  dev.addPass(createReconcileUnrealizedCastsPass());
  // Host code: what the CPU lowering does, plus the gpu runtime calls.
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createGpuToLLVMConversionPass());
  GpuModuleToBinaryPassOptions binary;
  binary.toolkitPath = options.toolkit;
  binary.compilationTarget = options.format;
  pm.addPass(createGpuModuleToBinaryPass(binary));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createEmitPackedEntry());
}

void mlir::par::buildLowerGPUPipeline(OpPassManager &pm,
                                      const GPUTargetOptions &options) {
  buildBufferizePhase(pm, /*outParams=*/true);
  buildLowerGPUPhase(pm, options);
}

void mlir::par::buildLowerCPUPipeline(OpPassManager &pm,
                                      const CPUKernelOptions &kernels,
                                      bool report) {
  buildBufferizePhase(pm, /*outParams=*/false, &kernels);
  buildLowerCPUPhase(pm, kernels.outlineKernels, report);
}

void mlir::par::buildFrontendPipeline(OpPassManager &pm,
                                      const CompileOptions &options) {
  // Before everything: torch-mlir's forms (fpowi, keepdim unit dims, the
  // dead argmax, pads, row gathers) become ones that mixed precision,
  // the pipeline split, autodiff and the sharding rules take. It preserves
  // semantics and leaves other programs as they are, so it is always on.
  buildNormalizeTorchPipeline(pm);
  buildPrecisionPhase(pm, options);
  buildPipelineSplitPhase(pm, options);
  buildTrainPhase(pm, options);
  buildSchedulePhase(pm, options);
}

void mlir::par::buildBackendPipeline(OpPassManager &spmd, OpPassManager &lower,
                                     const CompileOptions &options,
                                     const ProgramOptions &program) {
  buildSPMDPhase(spmd, options.communication, program);
  buildExportPhase(lower, program);
  if (program.target.isCuda()) {
    buildBufferizePhase(lower, /*outParams=*/true, /*kernels=*/nullptr,
                        options.training.zeroPrefetch);
    buildMemoryPlanPhase(lower, program);
    buildLowerGPUPhase(lower, program.target.gpu);
  } else {
    buildBufferizePhase(lower, /*outParams=*/false, &options.kernels,
                        options.training.zeroPrefetch);
    buildMemoryPlanPhase(lower, program);
    buildLowerCPUPhase(lower, options.kernels.outlineKernels,
                       program.kernelReport);
  }
}

void mlir::par::buildCompilePipeline(OpPassManager &pm,
                                     const CompileOptions &options,
                                     const TargetSpec &target) {
  buildFrontendPipeline(pm, options);
  buildBackendPipeline(pm, pm, options, getProgramOptions(options, target));
}

void mlir::par::registerParPipelines() {
  PassPipelineRegistration<SPMDPipelineOptions>(
      "par-spmd",
      "Sharding propagation, SPMD partitioning, cleanup and verification",
      [](OpPassManager &pm, const SPMDPipelineOptions &options) {
        buildSPMDPipeline(pm, options.communication, options.report);
      });
  PassPipelineRegistration<LowerCPUPipelineOptions>(
      "par-lower-cpu",
      "Bufferize a partitioned program and lower it to the LLVM dialect, "
      "collectives and matmuls as par runtime calls",
      [](OpPassManager &pm, const LowerCPUPipelineOptions &options) {
        buildLowerCPUPipeline(pm, options.kernels, options.report);
      });
  PassPipelineRegistration<LowerGPUPipelineOptions>(
      "par-lower-gpu",
      "Bufferize a partitioned program (results as out-parameters) and lower "
      "it for CUDA: kernels serialized for the chip, collectives and "
      "matmuls as par runtime calls (NCCL, cuBLAS)",
      [](OpPassManager &pm, const LowerGPUPipelineOptions &options) {
        buildLowerGPUPipeline(pm, options.get());
      });
  // Registered untyped so that checkCompileOptions' refusals reach the
  // driver's error handler, as par-compile reports them.
  registerPassPipeline(
      "par-compile-pipeline",
      "What par-compile runs: pipeline split, train step, schedule, SPMD "
      "partitioning (or the unsharded reference), manifest, bufferization "
      "and lowering to the LLVM dialect",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        CompileOptions options;
        if (failed(options.parseFromString(text)))
          return failure();
        std::string error;
        FailureOr<TargetSpec> target = checkCompileOptions(options, error);
        if (failed(target))
          return errorHandler(error);
        buildCompilePipeline(pm, options, *target);
        return success();
      },
      [](function_ref<void(const mlir::detail::PassOptions &)> handler) {
        handler(CompileOptions());
      });
}

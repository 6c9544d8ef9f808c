//===- Pipelines.cpp - par's pass pipelines -------------------------------===//
//
// See Pipelines.h. Every step is a typed pass creation with the reason it
// sits where it does.
//
//===----------------------------------------------------------------------===//

#include "par/Pipelines/Pipelines.h"
#include "par/Codegen/CPU/Passes.h"
#include "par/Codegen/GPU/Passes.h"
#include "par/Communication/Passes.h"
#include "par/Conversion/ParToRuntime/Passes.h"
#include "par/Dialect/Par/Transforms/Passes.h"
#include "par/Frontend/Passes.h"
#include "par/Pipelining/Passes.h"
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

void mlir::par::buildSPMDPipeline(OpPassManager &pm,
                                  const SPMDPipelineOptions &options) {
  // Cheap shared tensors (empty, fill, splat) get one copy per use, so that
  // one shared init does not force one sharding on all its users.
  pm.addPass(createSplitConstants());
  // Propagation needs the whole unsharded program to see every annotation
  // and every op's rule.
  pm.addPass(createShardingPropagation());
  // Partitioning reads propagation's shardings and makes types local.
  pm.addPass(createPartition());
  // Cleanup: fold what partitioning left (e.g. casts, duplicate constants).
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
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
  if (options.report)
    pm.addPass(createCommReport());
}

/// The loss-scaling policy `options` asks for ("" for none).
static std::string lossScalePolicy(const CompileOptions &options) {
  // Anything else reaches par-loss-scale, which names what it takes.
  if (options.lossScale == "auto")
    return options.precision == "f16" ? "dynamic" : "";
  return options.lossScale == "none" ? "" : options.lossScale.getValue();
}

void mlir::par::buildPrecisionPhase(OpPassManager &pm,
                                    const CompileOptions &options) {
  // On the whole unsharded forward, before the pipeline split (which then
  // cuts 16-bit activations) and before autodiff (the casts' adjoints make
  // the master weights' gradients f32).
  if (options.precision != "f32") {
    MixedPrecisionOptions mp;
    mp.computeType = options.precision;
    mp.keep.assign(options.keep.begin(), options.keep.end());
    pm.addPass(createMixedPrecision(mp));
  }
  // The loss scale seeds the backward (before autodiff) of the whole
  // forward (before the split: only the last stage reads it).
  std::string policy = lossScalePolicy(options);
  if (policy.empty() || options.optimizer == "none")
    return;
  LossScaleOptions ls;
  ls.policy = policy;
  ls.initScale = options.initScale;
  ls.growthFactor = options.growthFactor;
  ls.backoffFactor = options.backoffFactor;
  ls.growthInterval = options.growthInterval;
  ls.hysteresis = options.hysteresis;
  ls.minScale = options.minScale;
  pm.addPass(createLossScale(ls));
}

void mlir::par::buildPipelineSplitPhase(OpPassManager &pm,
                                        const CompileOptions &options) {
  if (options.stages <= 0)
    return;
  // Before autodiff: the stage functions are forwards, each differentiated
  // on its own, so every stage's backward lives with its forward.
  PipelineSplitOptions split;
  split.stages = options.stages;
  split.report = options.report;
  split.splitBackward = options.splitBackward || options.schedule == "zbh1";
  pm.addPass(createPipelineSplit(split));
}

void mlir::par::buildTrainPhase(OpPassManager &pm,
                                const CompileOptions &options) {
  if (options.optimizer == "none")
    return;
  // Reverse mode on the unsharded program: the backward is sharded later
  // by the same propagation as the forward.
  pm.addPass(createAutodiff());
  OptimizerOptions opt;
  opt.optimizer = options.optimizer;
  opt.lr = options.lr;
  opt.momentum = options.momentum;
  opt.beta1 = options.beta1;
  opt.beta2 = options.beta2;
  opt.epsilon = options.epsilon;
  opt.weightDecay = options.weightDecay;
  opt.clipNorm = options.clipNorm;
  opt.schedule = options.lrSchedule;
  opt.warmupSteps = options.warmupSteps;
  opt.totalSteps = options.totalSteps;
  opt.microBatches = options.microBatches;
  opt.zero = options.zero;
  opt.zeroAxes.assign(options.zeroAxes.begin(), options.zeroAxes.end());
  opt.report = options.report;
  pm.addPass(createOptimizer(opt));
}

void mlir::par::buildSchedulePhase(OpPassManager &pm,
                                   const CompileOptions &options) {
  if (options.stages <= 0)
    return;
  // After the optimizer: the schedule orders the stage functions' forwards,
  // backwards and updates, with the step's micro-batch count.
  PipelineScheduleOptions sched;
  sched.schedule = options.schedule;
  sched.microBatches = options.microBatches;
  sched.virtualStages = options.virtualStages;
  sched.axis = options.pipelineAxis;
  sched.diagram = options.report;
  pm.addPass(createPipelineSchedule(sched));
}

BackendOptions mlir::par::getBackendOptions(const CompileOptions &options) {
  BackendOptions b;
  b.reference = options.reference;
  b.manifest = options.manifest;
  b.report = options.commReport;
  b.gradReduce = options.gradReduce;
  b.sinkReductions = options.sinkReductions;
  b.bucketBytes = options.bucketBytes;
  b.compress = options.compress;
  b.compressRatio = options.compressRatio;
  b.compressChunk = options.compressChunk;
  b.errorFeedback = options.errorFeedback;
  b.compressMinElements = options.compressMinElements;
  b.compressWarmup = options.compressWarmup;
  b.target = options.target;
  return b;
}

void mlir::par::buildSPMDPhase(OpPassManager &pm,
                               const BackendOptions &options) {
  if (!options.reference) {
    SPMDPipelineOptions spmd;
    spmd.report = options.report;
    spmd.gradReduce = options.gradReduce;
    spmd.sinkReductions = options.sinkReductions;
    spmd.bucketBytes = options.bucketBytes;
    spmd.compress = options.compress;
    spmd.compressRatio = options.compressRatio;
    spmd.compressChunk = options.compressChunk;
    spmd.errorFeedback = options.errorFeedback;
    spmd.compressMinElements = options.compressMinElements;
    spmd.compressWarmup = options.compressWarmup;
    buildSPMDPipeline(pm, spmd);
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
                                 const BackendOptions &options) {
  if (options.manifest.empty())
    return;
  // On tensors, before bufferization: the manifest reads every argument's
  // global type, local type and sharding.
  ExportManifestOptions exp;
  exp.outputFile = options.manifest;
  // "cuda" is spelled with its chip ("cuda:sm_90"), as readers expect.
  bool cuda = false;
  GPUTargetOptions gpu;
  std::string error;
  exp.target = parseTarget(options.target, cuda, gpu, error) && cuda
                   ? "cuda:" + gpu.chip
                   : "cpu";
  pm.addPass(createExportManifest(exp));
}

CPUKernelOptions mlir::par::getCPUKernelOptions(const CompileOptions &options) {
  return {options.fuseReductions, options.fpReassociate, options.mathApprox,
          options.outlineKernels, options.report};
}

void mlir::par::buildBufferizePhase(OpPassManager &pm, bool outParams,
                                    const CPUKernelOptions *kernels) {
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
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
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
  pm.addPass(bufferization::createLowerDeallocationsPass());
  pm.addPass(createCSEPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createConvertBufferizationToMemRefPass());
}

void mlir::par::buildLowerCPUPhase(OpPassManager &pm,
                                   const CPUKernelOptions &kernels) {
  // Buffer collectives become runtime kernel calls; matmuls take the BLAS
  // path before the remaining linalg becomes loops.
  pm.addPass(createCollectivesToRuntime());
  pm.addPass(createMatmulToRuntime());
  // Every remaining kernel a function, identical ones (the layers') once:
  // LLVM then optimises and generates each distinct kernel once, and the
  // compile time stops growing with the depth (RationaleCPUKernels.md).
  if (kernels.outlineKernels) {
    OutlineKernelsOptions outline;
    outline.report = kernels.report;
    pm.addPass(createOutlineKernels(outline));
  }
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
  // Buffers from the runtime's pool (_mlir_memref_to_llvm_alloc/free,
  // lib/Runtime/core/Allocator.cpp): no malloc per intermediate per step.
  FinalizeMemRefToLLVMConversionPassOptions memrefToLLVM;
  memrefToLLVM.useGenericFunctions = true;
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

bool mlir::par::parseTarget(StringRef target, bool &isCuda,
                            GPUTargetOptions &gpu, std::string &error) {
  isCuda = false;
  if (target == "cpu")
    return true;
  StringRef chip;
  if (target == "cuda") {
    chip = "sm_90";
  } else if (target.consume_front("cuda:")) {
    chip = target;
    unsigned sm;
    if (!chip.starts_with("sm_") || chip.drop_front(3).getAsInteger(10, sm) ||
        sm < 70) {
      error = "unknown cuda chip '" + chip.str() +
              "' (expected sm_NN with NN >= 70, e.g. sm_90)";
      return false;
    }
  } else {
    error = "unknown target '" + target.str() +
            "' (expected cpu, cuda or cuda:sm_NN)";
    return false;
  }
  isCuda = true;
  gpu.chip = chip.str();
  return true;
}

void mlir::par::buildLowerCPUPipeline(OpPassManager &pm,
                                      const CPUKernelOptions &kernels) {
  buildBufferizePhase(pm, /*outParams=*/false, &kernels);
  buildLowerCPUPhase(pm, kernels);
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

void mlir::par::buildBackendPipeline(OpPassManager &pm,
                                     const BackendOptions &options) {
  buildSPMDPhase(pm, options);
  buildExportPhase(pm, options);
  bool cuda = false;
  GPUTargetOptions gpu;
  std::string error;
  if (parseTarget(options.target, cuda, gpu, error) && cuda)
    buildLowerGPUPipeline(pm, gpu);
  else
    buildLowerCPUPipeline(pm); // a bad target was refused by the caller
}

void mlir::par::buildCompilePipeline(OpPassManager &pm,
                                     const CompileOptions &options) {
  buildFrontendPipeline(pm, options);
  buildBackendPipeline(pm, getBackendOptions(options));
}

void mlir::par::registerParPipelines() {
  PassPipelineRegistration<SPMDPipelineOptions>(
      "par-spmd",
      "Sharding propagation, SPMD partitioning, cleanup and verification",
      buildSPMDPipeline);
  PassPipelineRegistration<LowerCPUPipelineOptions>(
      "par-lower-cpu",
      "Bufferize a partitioned program and lower it to the LLVM dialect, "
      "collectives and matmuls as par runtime calls",
      [](OpPassManager &pm, const LowerCPUPipelineOptions &options) {
        buildLowerCPUPipeline(pm, options.get());
      });
  PassPipelineRegistration<LowerGPUPipelineOptions>(
      "par-lower-gpu",
      "Bufferize a partitioned program (results as out-parameters) and lower "
      "it for CUDA: kernels serialized for the chip, collectives and "
      "matmuls as par runtime calls (NCCL, cuBLAS)",
      [](OpPassManager &pm, const LowerGPUPipelineOptions &options) {
        buildLowerGPUPipeline(pm, options.get());
      });
  PassPipelineRegistration<CompileOptions>(
      "par-compile-pipeline",
      "What par-compile runs: pipeline split, train step, schedule, SPMD "
      "partitioning (or the unsharded reference), manifest, bufferization "
      "and lowering to the LLVM dialect",
      buildCompilePipeline);
}

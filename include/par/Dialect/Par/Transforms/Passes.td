//===- Passes.td - par passes ------------------------------*- tablegen -*-===//

#ifndef PAR_DIALECT_PAR_TRANSFORMS_PASSES_TD
#define PAR_DIALECT_PAR_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def Autodiff : Pass<"par-autodiff", "ModuleOp"> {
  let summary = "Reverse-mode differentiation of a forward + loss function";
  let description = [{
    For every function with arguments marked `par.param`, adds
    `<name>_grad` with the same arguments returning the loss followed by the
    gradient of the loss with respect to each parameter (in argument order).
    The function must return one scalar loss (`tensor<f32>`, `tensor<f64>`,
    ...). Runs on the unsharded program, before sharding (as JAX does): the
    backward is then sharded by the same propagation, and data-parallel
    gradient reductions appear without special cases.

    Named linalg ops and elementwise tensor ops are first expressed as
    `linalg.generic`. The adjoint of a generic, for each input, is one
    generic over the same loops that recomputes the body, takes its
    forward-mode derivative with respect to that input's block argument
    (chain rule over add, sub, mul, div, neg, exp, log, tanh, erf, sqrt,
    rsqrt, max/min, select, casts) and accumulates `dy * d(body)/d(input)`
    into the input's gradient, reducing over the loops the input does not
    index (broadcasts). Reshapes, slices, inserts and concatenations get
    their structural adjoints; softmax its closed form. An op it cannot
    differentiate is an error naming it.

    ```mlir
    func.func @loss(%x: tensor<8x4xf32>, %w: tensor<4x2xf32> {par.param}) -> tensor<f32>
    // => func.func @loss_grad(%x, %w) -> (tensor<f32>, tensor<4x2xf32>)
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::func::FuncDialect"];
}

def Optimizer : Pass<"par-optimizer", "ModuleOp"> {
  let summary = "Builds a train step: gradient plus optimizer update";
  let description = [{
    For every function `f` with `par.param` arguments and a gradient
    function `f_grad` (from par-autodiff), adds `f_step`: it calls `f_grad`
    and applies the update to every parameter, returning the loss, the new
    parameters and the new optimizer state. Optimizer state is program
    state: extra arguments after f's, one tensor of each kind per parameter,
    so that propagation shards it exactly like its parameter.

    - `sgd`: `p - lr * g`. No state.
    - `momentum` (PyTorch's SGD with momentum, no dampening):
      `b = mu * b + g; p = p - lr * b`. State: `b` per parameter.
    - `adamw` (PyTorch's AdamW): `m = b1 m + (1-b1) g`,
      `v = b2 v + (1-b2) g^2`, `p = p - lr * wd * p - lr * m_hat /
      (sqrt(v_hat) + eps)` with bias corrections `1 - b^t`. State: `m`, `v`
      per parameter, then the step number `t` (a scalar tensor, 1 for the
      first step; the step returns t + 1).

    With `schedule=cosine` the learning rate of step t (1-based) is
    `lr * t / W` for t <= W (warmup-steps) and then
    `lr * 0.5 * (1 + cos(pi * min(1, (t - W) / (T - W))))` (T = total-steps);
    the step number t is then an argument (and result) for every optimizer.

    With `clip-norm=c > 0` every gradient is first scaled by
    `min(1, c / (norm + 1e-6))`, `norm` being the L2 norm of all gradients
    together (PyTorch's clip_grad_norm_). Each squared sum is a reduction
    over its gradient's dims, so with sharded gradients partitioning adds the
    all_reduces that make the norm global.

    With `micro-batches=m > 1` the step accumulates gradients (Megatron's
    and DeepSpeed's gradient accumulation): `f` is the program of one
    micro-batch, and the step takes m of them, every non-parameter argument
    (the data) having an m-fold dim 0. `f_grad` is called once per
    micro-batch and the losses and gradients are averaged before the update,
    so for a loss that is a mean over the batch the step equals one step on
    the whole batch. Micro-batch k takes the rows `i * m + k`: the split is
    an `expand_shape` to `[B, m, ...]` and a slice of the unsharded `m` dim,
    so a batch dim sharded over `dp` stays sharded, without communication.
    The step carries `par.micro_batches = m`. (Each micro-batch's gradients
    are reduced over `dp` inside its `f_grad` call: m all_reduces per
    gradient where DDP's no_sync does one.)

    ```mlir
    func.func @loss_step(%x, %w {par.param}, ..., %m_w, %v_w, %t) -> (loss, w', m_w', v_w', t')
    ```
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"sgd\"",
           "sgd, momentum or adamw">,
    Option<"lr", "lr", "double", /*default=*/"0.01", "Learning rate">,
    Option<"momentum", "momentum", "double", /*default=*/"0.9",
           "Momentum (momentum optimizer)">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "AdamW beta2">,
    Option<"epsilon", "eps", "double", /*default=*/"1e-8", "AdamW epsilon">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.01",
           "AdamW decoupled weight decay">,
    Option<"clipNorm", "clip-norm", "double", /*default=*/"0",
           "Clip gradients by their global L2 norm (0: no clipping)">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"constant\"",
           "Learning-rate schedule: constant or cosine (linear warmup, then "
           "cosine decay to 0 at total-steps)">,
    Option<"warmupSteps", "warmup-steps", "int64_t", /*default=*/"0",
           "Warmup steps of the cosine schedule">,
    Option<"totalSteps", "total-steps", "int64_t", /*default=*/"0",
           "Steps of the cosine schedule (must exceed warmup-steps)">,
    Option<"microBatches", "micro-batches", "int64_t", /*default=*/"1",
           "Gradient accumulation: the step takes this many micro-batches "
           "(data arguments stacked along dim 0) and averages their "
           "gradients">
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::func::FuncDialect"];
}

def PipelineSplit : Pass<"par-pipeline-split", "ModuleOp"> {
  let summary = "Splits a forward + loss into pipeline stages balanced by cost";
  let description = [{
    Cuts the function with `par.param` arguments (or `func=NAME`) into
    `stages` consecutive stages. A cut may only fall where exactly one
    floating-point tensor computed so far is still needed later (the
    activation that travels between stages); constants, `tensor.empty` and
    fills of them are recreated wherever they are used. Among those points,
    the cuts minimise the largest stage cost (dynamic programming), the cost
    of an op being its FLOPs (iteration space x body ops; 2 per
    multiply-accumulate) plus 4 x the bytes it reads and writes
    (docs/RationalePipeline.md). An op with `par.stage = k` stays in stage
    k; everything else is placed by cost.

    For each stage k it adds `@f_s<k>_fwd(args..., [x]) -> y` (the stage's
    forward; the last stage returns the loss) and the differentiable
    `@f_s<k>(args..., x, dy) -> scalar` (x marked par.param; the loss for the
    last stage, `sum(y * dy)` otherwise), whose gradient (par-autodiff) is
    the stage's backward: parameter gradients and the input's gradient `dx`
    for the stage before. `args` are the split function's arguments the
    stage uses, in order (`par.stage_args` maps them back); parameters and
    their state thus live on their stage only. The activation takes the
    sharding propagation gives it in the whole function, so both sides of a
    transfer agree. The module gets `par.pipeline = {func, stages}`.

    With `split-backward=true` it also adds `@f_s<k>_bi` (k > 0) and
    `@f_s<k>_bw`, the same scalar with only the input, or only the
    parameters, marked: their gradients are the two halves of the backward
    that ZB-H1 schedules apart (`par.stage_part = "input"`/`"weight"`).

    With `report=true` it prints each stage's op count, cost, parameter
    bytes and the imbalance (largest cost over mean).
  }];
  let options = [
    Option<"stages", "stages", "int64_t", /*default=*/"0",
           "Number of pipeline stages (pp axis size x virtual stages)">,
    Option<"funcName", "func", "std::string", /*default=*/"\"\"",
           "The function to split (default: the one with par.param "
           "arguments)">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Print each stage's cost and the imbalance">,
    Option<"splitBackward", "split-backward", "bool", /*default=*/"false",
           "Also make `_bi` (input gradient only) and `_bw` (weight "
           "gradient only) stage functions, for ZB-H1">
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::func::FuncDialect"];
}

def PipelineSchedule : Pass<"par-pipeline-schedule", "ModuleOp"> {
  let summary = "Puts each pipeline rank's ordered actions into the IR";
  let description = [{
    For a module par-pipeline-split made, derives from one global timetable
    (lib/Pipeline, docs/RationalePipeline.md) every pipeline rank's ordered
    list of actions for `schedule` (gpipe, 1f1b, interleaved with
    `virtual` > 1 stages per rank, zbh1 after
    `par-pipeline-split=split-backward=true`) and `micro-batches` m: forward and
    backward of (micro-batch, stage) and the sends and receives of
    activations and their gradients between ranks of the mesh axis `axis`
    (the stage count must be its size x virtual). The programs are proved
    deadlock-free under blocking send/recv before they are stored in the
    module's `par.pipeline` dictionary (`programs`: one string per rank).
    With `diagram=true` it prints the schedule's timeline (unit costs).
  }];
  let options = [
    Option<"schedule", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "gpipe, 1f1b, interleaved or zbh1">,
    Option<"microBatches", "micro-batches", "int64_t", /*default=*/"1",
           "Micro-batches per step">,
    Option<"virtualStages", "virtual", "int64_t", /*default=*/"1",
           "Stages per rank (interleaved)">,
    Option<"axis", "axis", "std::string", /*default=*/"\"pp\"",
           "The pipeline mesh axis">,
    Option<"diagram", "diagram", "bool", /*default=*/"false",
           "Print the schedule's timeline">
  ];
}

def VerifyPipeline : Pass<"par-verify-pipeline", "ModuleOp"> {
  let summary = "Proves the stored pipeline programs free of deadlock";
  let description = [{
    Re-parses the per-rank programs in the module's `par.pipeline` (for
    example after a hand edit) and simulates them under blocking
    send/recv: every forward and backward present once, every send meeting
    the matching receive in order. A program that would hang is an error
    naming the two ranks and the actions they are blocked in.
  }];
}

def SplitConstants : Pass<"par-split-constants", "ModuleOp"> {
  let summary = "Gives every use of a cheap tensor its own copy";
  let description = [{
    A `tensor.empty`, a `tensor.splat`, a splat `arith.constant` or a
    `linalg.fill` of one of these costs nothing to recreate, but a single
    value shared by several ops (as CSE leaves it) would have to take one
    sharding for all of them, forcing needless communication. Like Shardy's
    constant splitter, this pass clones such ops per use before propagation;
    CSE merges the identical local copies again after partitioning.

    ```mlir
    %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
    // used by two matmuls -> one fill (and empty) per matmul
    ```
  }];
  let statistics = [
    Statistic<"numClones", "clones", "Ops cloned">
  ];
}

def ShardingPropagation : Pass<"par-sharding-propagation", "ModuleOp"> {
  let summary = "Propagates mesh shardings to every tensor in the module";
  let description = [{
    Runs a fixed point over every function (all blocks and nested regions),
    forward and backward through each op's sharding rule, starting from the
    explicit annotations (`par.sharding` on function arguments and results,
    `par.sharding_constraint`, `par.reshard`), which always win. Values tied
    by control flow (scf.for iter_args, scf.if/scf.while results, branch
    operands, func.call operands and results) share one sharding. When the
    shardings reaching a loop ("factor") of an op disagree, the candidate that
    moves the fewest bytes (ring formulas) wins; ties go to the candidate
    seen first in operand order. The result is written as `par.sharding`
    attributes: on function arguments and results, and on every op with
    tensor results (one entry per result). See docs/RationalePropagation.md.

    Example: with `%w` split by columns over "tp", a matmul result gets
    `[{}, {"tp"} ]`:
    ```mlir
    %0 = linalg.matmul {par.sharding = [#par.sharding<@mesh, [{}, {"tp"} ]> ]}
           ins(%x, %w : tensor<8x16xf32>, tensor<16x32xf32>) ...
    ```
  }];
  let dependentDialects = ["::mlir::par::ParDialect"];
  let statistics = [
    Statistic<"numIterations", "iterations", "Worklist steps to the fixed point">,
    Statistic<"numConflicts", "conflicts", "Factors with disagreeing shardings">
  ];
}

def Partition : Pass<"par-partition", "ModuleOp"> {
  let summary = "Rewrites a propagated program into one SPMD program";
  let description = [{
    Gives every tensor its per-device type and inserts the collectives that
    move data where shardings differ. Each op runs on its local blocks with
    the loop ("factor") split its operands and results agree on; a split
    reduction loop leaves a partial result, which becomes an all_reduce
    (partial to replicated) or a reduce_scatter (partial to split). Any other
    change of sharding is decomposed into all_gather, all_to_all and
    all_slice steps. A dimension that its axes do not divide is an error
    naming the tensor, the dimension and the axes. Function signatures get
    local types and keep their `par.sharding` attributes (the global layout).

    Example:
    ```mlir
    %0 = linalg.matmul ins(%x, %w : tensor<8x4xf32>, tensor<4x16xf32>) ...
    %1 = par.all_reduce %0 on @mesh axes = ["tp"] kind = sum : tensor<8x16xf32>
    ```
  }];
  let dependentDialects = ["::mlir::par::ParDialect",
                           "::mlir::tensor::TensorDialect"];
  let statistics = [
    Statistic<"numCollectives", "collectives", "Collectives inserted">
  ];
}

def VerifySPMD : Pass<"par-verify-spmd", "ModuleOp"> {
  let summary = "Checks the contract of a partitioned program";
  let description = [{
    The partitioning stage ends here (IREE style): no `par.sharding_constraint`
    or `par.reshard` is left, and every function argument and result type is
    the local type of its `par.sharding` on its mesh.
  }];
}

def CommReport : Pass<"par-comm-report", "ModuleOp"> {
  let summary = "Prints the bytes each device sends per collective";
  let description = [{
    For each function, lists every collective with its mesh axes, group
    size, element type and the bytes one device sends per call under the ring
    formulas (all_reduce 2(n-1)/n S, all_gather and reduce_scatter and
    all_to_all (n-1)/n S with S the larger of the input and result, broadcast
    and send S), followed by the function's total. Collectives inside loops
    are counted once per appearance. The IR is left unchanged.

    ```
    par-comm-report: @forward
      par.all_reduce axes=["tp"] n=4 f32 tensor<8x16xf32>: 768 bytes
      total: 1 collectives, 768 bytes per device
    ```
  }];
  let options = [
    Option<"outputFile", "output", "std::string", /*default=*/"\"-\"",
           "Where to write the report ('-' for stdout)">
  ];
}

def StripShardings : Pass<"par-strip-shardings", "ModuleOp"> {
  let summary = "Removes every sharding: the unsharded reference program";
  let description = [{
    Drops `par.sharding` attributes, replaces `par.sharding_constraint` and
    `par.reshard` by their operands and removes meshes. The result is the
    same program on one device; `par-compile` builds it next to the sharded
    one so that `par-run --verify` can compare them on the same inputs.
  }];
}

def ExportManifest : Pass<"par-export-manifest", "ModuleOp"> {
  let summary = "Writes the entry points' interface as JSON";
  let description = [{
    For every public function with a body: its name, mesh (axes and sizes;
    none for an unsharded program) and, per argument and result, the element
    type, global and local shapes and sharding (per-dimension axes, partial
    axes and kind). A runtime driver (par-run) reads it to initialise,
    scatter and gather tensors. Run after partitioning.

    ```json
    {"functions": [{"name": "mlp", "mesh": {"name": "mesh", "axes": [{"name": "tp", "size": 4} ]},
      "inputs": [{"dtype": "f32", "global_shape": [8, 16], "local_shape": [8, 16],
                  "sharding": {"dims": [[], []], "partial": [], "partial_kind": "sum"}} ], ...} ]}
    ```
  }];
  let options = [
    Option<"outputFile", "output", "std::string", /*default=*/"\"-\"",
           "Where to write the manifest ('-' for stdout)">
  ];
}

def DecomposeAggregatedOps : Pass<"par-decompose-aggregated-ops", "ModuleOp"> {
  let summary = "Rewrites aggregated linalg ops (softmax) into structured ops";
  let description = [{
    Ops implementing `linalg::AggregatedOpInterface` (e.g. `linalg.softmax`)
    are replaced by their decomposition (reductions and elementwise
    generics) on tensors, so that they bufferize and lower to loops like
    any other structured op. Runs after partitioning: sharding works on the
    aggregated op, whose rule is simpler.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect"];
}

def FuseElementwise : Pass<"par-fuse-elementwise", "ModuleOp"> {
  let summary = "Fuses chains of elementwise generics on tensors";
  let description = [{
    Fuses a `linalg.generic` producer into its `linalg.generic` consumer
    when the producer has no other user and the consumer reads it through
    a permutation of all its loops (so no producer element is recomputed,
    e.g. inside a contraction), so that a chain like
    `x * scale + bias -> tanh` runs as one loop nest. Unlike upstream's
    `linalg-fuse-elementwise-ops` it neither moves reshapes nor touches
    named ops, so matmuls stay matmuls and keep the BLAS path.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def MatmulToRuntime : Pass<"par-matmul-to-runtime", "ModuleOp"> {
  let summary = "Lowers buffer-level f32/f64 matmuls to the runtime's BLAS call";
  let description = [{
    A `linalg.matmul` on contiguous, static f32 or f64 memrefs with the
    default indexing maps becomes `par_rt_k_matmul(a, b, c, M, N, K, dtype,
    accumulate=1)` (OpenBLAS on the CPU backend, cuBLAS on CUDA). A
    `linalg.generic` that is a batch of GEMMs (body `acc + a * b`, one
    reduction loop, leading batch loops shared by all three operands, each
    operand's last two dims a possibly transposed matrix) becomes
    `par_rt_k_batch_matmul` (attention's QK^T and PV, generalized matmuls).
    Other contractions are left for loop lowering.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect"];
}

def MarkEntryPoints : Pass<"par-mark-entry-points", "ModuleOp"> {
  let summary = "Asks for C interfaces on the public functions";
  let description = [{
    Sets `llvm.emit_c_interface` on every public function with a body, so
    that func-to-LLVM emits `_mlir_ciface_<name>` taking memref descriptors
    by pointer; `par-emit-packed-entry` then wraps those. Drops the
    `par.sharding`/`par.global_type` signature attributes: the manifest
    (par-export-manifest) holds them, and below tensor level they would
    describe memrefs.
  }];
}

def EmitPackedEntry : Pass<"par-emit-packed-entry", "ModuleOp"> {
  let summary = "Adds one `void par_packed_<name>(void **)` per entry point";
  let description = [{
    After lowering to the LLVM dialect: for each `_mlir_ciface_<name>`, an
    exported `par_packed_<name>(void **argv)` that calls it with the
    pointers in argv (results first, then arguments, each a memref
    descriptor). A driver can then call any entry point through one C
    signature, whatever its arity. Also removes the (by now unused)
    `par.mesh` ops, leaving a module that translates to LLVM IR.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def TestShardingRules : Pass<"par-test-sharding-rules", "ModuleOp"> {
  let summary = "Test pass: reports each op's sharding rule as a remark";
  let description = [{
    Emits `sharding rule: <rule>` as a remark on every op that has a rule
    (and `no sharding rule` on ops with tensor operands or results that have
    none), so that rules can be pinned with -verify-diagnostics. Factors are
    named i, j, k, ... in order; `_` marks a dimension with no factor.

    ```
    // expected-remark @below {{sharding rule: ([i, k], [k, j], [i, j]) -> ([i, j]) {i=8, j=16, k=4 reduction} combine sum}}
    ```
  }];
}

#endif // PAR_DIALECT_PAR_TRANSFORMS_PASSES_TD

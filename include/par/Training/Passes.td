//===- Passes.td - Training passes --------------------------------*- tablegen -*-===//

#ifndef PAR_TRAINING_PASSES_TD
#define PAR_TRAINING_PASSES_TD

include "mlir/Pass/PassBase.td"

def Autodiff : Pass<"par-autodiff", "ModuleOp"> {
  let summary = "Reverse-mode differentiation of a forward + loss function";
  let description = [{
    For every function with arguments marked `par.param`, adds
    `<name>_grad` with the same arguments returning the loss followed by the
    gradient of the loss with respect to each parameter (in argument order),
    and links it from the function with `par.grad = @<name>_grad` (what
    par-optimizer and the pipeline's stage table follow). A pipeline
    stage's gradients (a `par.stage` function's) are pinned to their
    arguments' shardings (replicated where none): the runner sums them
    into the update's arguments and sends `dx` back as the previous
    stage's `dy`, byte for byte.
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
    index (broadcasts). A reduction's combiner must be a sum, or a
    maximum/minimum with a constant init (torch's amax): its adjoint reads
    the final maximum, so the gradient goes to the elements that attain
    it. Reshapes, slices, inserts and concatenations get
    their structural adjoints; softmax its closed form. Each op's adjoint
    is its `AdjointOpInterface` (external models on upstream ops in
    lib/Training/AdjointModels.cpp); an op without one is an error naming
    it.

    ```mlir
    func.func @loss(%x: tensor<8x4xf32>, %w: tensor<4x2xf32> {par.param}) -> tensor<f32>
    // => func.func @loss(...) attributes {par.grad = @loss_grad}
    //    func.func @loss_grad(%x, %w) -> (tensor<f32>, tensor<4x2xf32>)
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::func::FuncDialect"];
}

def Recompute : Pass<"par-recompute", "ModuleOp"> {
  let summary = "Activation recomputation: frees forward values until the "
                "backward recomputes them";
  let description = [{
    Runs right after par-autodiff, on every gradient function (the
    `par.grad` of a function with `par.param` arguments). par-autodiff's
    backward reads forward values directly, so each one it reads stays
    alive (is saved) from the forward until its last backward use. This
    pass chooses which stay saved: every backward use of a value it
    recomputes reads instead a clone of the value's forward computation,
    placed right before the first backward op that needs it and starting
    from saved values passed through `par.recompute_barrier` (so that CSE
    cannot fold the clones back into the forward). The clones are the
    forward's ops with the forward's operands' values: the losses and
    gradients are bit for bit those without recomputation.

    The structure is found in the program, not in names, so that
    generated and imported (flat) models are treated alike:

    - a *residual add* is an elementwise add of two activations one of
      which depends on the other (`x + f(x)`); chained ones are the
      residual stream;
    - an *attention core* runs from an activation x activation contraction
      (QK^T) through the ops between it and the next such contraction that
      consumes it (scale, mask, softmax) to that contraction (the
      attention-weighted sum), not crossing any other contraction;
    - a *layer* (transformer block) runs from the residual stream value
      that enters a residual segment holding an attention core to the one
      that enters the next such segment (one attention and one MLP
      segment in a pre-LN block); without attention, every residual
      segment is a layer. Layers are numbered from 0 in program order.

    An activation is a value that depends on a data (non-parameter)
    argument; values computed from parameters and constants alone are
    never recomputed.

    - `policy=none`: nothing changes.
    - `policy=selective` (Korthikanti et al. 2022): the attention cores'
      QK^T, scale/mask and softmax are recomputed from the saved Q, K and
      V; the attention-weighted sum stays saved (the output projection's
      input), so no s x s tensor outlives the forward.
    - `policy=full`: each layer's input is saved and every activation the
      layer computes is recomputed from it (its output is the next layer's
      saved input).

    `layers` limits either to some layers: indices and inclusive ranges,
    `layers=0,2-3` (default: all). `report=true` prints, per gradient
    function, the layers and cores found, the ops recomputed, the forward
    values the backward no longer reads and the extra forward FLOPs
    against the forward's, a step's (3 forwards: the backward counted as
    two, as in Korthikanti et al.) and the gradient function's as built. With pipeline stages, each stage's gradient function
    numbers its own layers.

    ```mlir
    // policy=selective, in @gpt_grad's backward:
    %q1 = par.recompute_barrier %q : tensor<2x2x8x8xf32>
    %k1 = par.recompute_barrier %k : tensor<2x2x8x8xf32>
    %s1 = linalg.generic ... ins(%q1, %k1 ...)   // QK^T again
    %m1 = linalg.generic ... ins(%s1 ...)        // scale and mask
    %p1 = linalg.softmax dimension(3) ins(%m1 ...)
    // the softmax's and the weighted sum's adjoints read %p1, not %p
    ```
  }];
  let options = [
    Option<"policy", "policy", "std::string", /*default=*/"\"none\"",
           "none, selective (attention cores) or full (whole layers)">,
    ListOption<"layers", "layers", "std::string",
               "The layers to recompute: indices and inclusive ranges "
               "(0,2-3); default all">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Print the structure found, the ops recomputed and the extra "
           "forward FLOPs">
  ];
  let dependentDialects = ["::mlir::par::ParDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def MixedPrecision : Pass<"par-mixed-precision", "ModuleOp"> {
  let summary = "Computes in f16 or bf16 with f32 master weights";
  let description = [{
    Runs on the unsharded forward + loss, before par-autodiff. Parameters
    (`par.param` arguments) stay f32: they are the master weights the
    optimizer updates and its state is f32 like them. Each use of an f32
    value by an op that computes in the compute type gets a cast (one per
    value and type; a value widened from 16 bits narrows to its source, so
    casts never chain). Ops fall in four kinds:

    - `matmul` (linalg.matmul, linalg.batch_matmul, generic contractions):
      16-bit inputs, f32 accumulator and result, as cuBLAS's GEMM with f32
      compute;
    - `elementwise` (all-parallel generics): 16-bit inputs and result; the
      body widens its inputs and computes in f32, rounding once when it
      yields;
    - `reduction` (generics with reduction loops: LayerNorm statistics,
      cross-entropy's log-sum-exp, the loss) and `softmax` (linalg.softmax).

    Kinds on `keep` (default `reduction,softmax`) read f32 and produce f32:
    LayerNorm statistics, softmax, cross-entropy and the final reduction of
    the loss stay f32. An op with `par.precision = "f32"` is kept whatever
    its kind, one with `par.precision = "compute"` is converted. Reshapes,
    slices, transposes, broadcasts and sharding constraints carry the type
    that reaches them; function results keep their types. Through the
    casts' adjoints the gradient of every master weight is f32. The
    function gets `par.mixed_precision = <compute type>`; running the pass
    again on it is an error.

    ```mlir
    // compute=bf16: %w : tensor<16x32xf32> {par.param}
    %wc = linalg.generic ... ins(%w) { arith.truncf : f32 to bf16 }
    %y = linalg.matmul ins(%xc, %wc : tensor<8x16xbf16>, tensor<16x32xbf16>)
                       outs(%acc : tensor<8x32xf32>)
    ```
  }];
  let options = [
    Option<"computeType", "compute", "std::string", /*default=*/"\"bf16\"",
           "The compute type: f16 or bf16">,
    ListOption<"keep", "keep", "std::string",
               "Op kinds that stay in f32 (matmul, elementwise, reduction, "
               "softmax; none for none); default reduction,softmax">
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
}

def LossScale : Pass<"par-loss-scale", "ModuleOp"> {
  let summary = "Scales the loss of a forward + loss for 16-bit gradients";
  let description = [{
    Runs before par-autodiff (after par-mixed-precision). Every function with
    `par.param` arguments gets one more argument, the loss scale (a
    `tensor<f32>` with `par.loss_scale = #par.loss_scale<...>`, the policy,
    and `par.init = #par.init<fill, init>`), and returns its loss through
    `par.scale_loss`: the forward value is the loss, and par-autodiff's
    backward starts at the scale, so every gradient comes out scaled and
    small f16 gradients do not flush to zero. par-optimizer then builds the
    rest into the train step: the gradients are unscaled (clipping sees
    the unscaled ones), `par.all_finite` decides over every device of the
    mesh whether the step is taken, the update is a select (a skipped step
    leaves parameters, optimizer state and step number unchanged, bit for
    bit), and `par.update_loss_scale` computes the next scale state
    (scale, good-step count and hysteresis tracker: arguments and results
    of the step, fed back like the optimizer's state). The step's
    `par.loss_scale_results` names the results holding the scale and the
    finite flag.

    Defaults are PyTorch's GradScaler (init 2^16, growth 2 every 2000
    finite steps, backoff 0.5, no hysteresis); Megatron's are init 2^32,
    interval 1000, hysteresis 2, min 1.

    ```mlir
    func.func @loss(%x, %w {par.param},
                    %scale: tensor<f32> {par.init = #par.init<fill, 65536.0>,
                                         par.loss_scale = #par.loss_scale<...>})
    //   return par.scale_loss %l by %scale
    ```
  }];
  let options = [
    Option<"policy", "policy", "std::string", /*default=*/"\"dynamic\"",
           "static (the scale stays init-scale) or dynamic">,
    Option<"initScale", "init-scale", "double", /*default=*/"65536.0",
           "The first step's scale">,
    Option<"growthFactor", "growth-factor", "double", /*default=*/"2.0",
           "Dynamic: the factor after growth-interval finite steps (> 1)">,
    Option<"backoffFactor", "backoff-factor", "double", /*default=*/"0.5",
           "Dynamic: the factor after a non-finite step (in (0, 1))">,
    Option<"growthInterval", "growth-interval", "int64_t", /*default=*/"2000",
           "Dynamic: finite steps in a row before the scale grows">,
    Option<"hysteresis", "hysteresis", "int64_t", /*default=*/"1",
           "Dynamic: non-finite steps (since the last growth) before the "
           "scale backs off">,
    Option<"minScale", "min-scale", "double", /*default=*/"1.0",
           "Dynamic: the scale never backs off below this">
  ];
  let dependentDialects = ["::mlir::par::ParDialect"];
}

def Optimizer : Pass<"par-optimizer", "ModuleOp"> {
  let summary = "Builds a train step: gradient plus optimizer update";
  let description = [{
    For every function `f` with `par.param` arguments and a gradient
    function (the `par.grad` par-autodiff records on `f`; without one it is
    an error), adds `f_step`: it calls the gradient and applies the update
    to every parameter, returning the loss, the new parameters and the new
    optimizer state. `f` gets `par.step = @f_step`; the step gets
    `par.grad` (the gradient it calls) and `f`'s `par.logits`. For a
    pipeline stage's scalar it adds the stage's update instead, linked by
    `par.update`. Optimizer state is program
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

    With `zero=1` (DeepSpeed's ZeRO stage 1, GSPMD's weight-update
    sharding) the optimizer state and the update of each parameter are
    sharded over the data-parallel axes as well: the mesh axes the data
    arguments split their dim 0 over (or `zero-axes`, when given), less the
    axes the parameter is already split over. They are appended (minor) to
    the first dimension of the parameter whose local size their device count
    divides. The step states it with annotations only: state arguments and
    results get that sharding, each gradient a `par.sharding_constraint` to
    it (before unscaling, clipping and the update, which then run on 1/n of
    it), each new parameter a `par.sharding_constraint` back to the
    parameter's own sharding (partitioning: an all_gather). Parameters are
    pinned to their annotation (replicated when they have none); one with
    no dividing dimension keeps its state unsharded, with a remark. Not
    with pipeline stages (an error). `report=true` prints each parameter's
    state sharding, the optimizer state bytes per rank with and without
    ZeRO, and the ring bytes of the gradient reduction and the parameter
    gather.

    `zero=2` (ZeRO stage 2) is the same program as `zero=1`: the gradient
    is already reduce-scattered into the state's layout, never all-reduced
    whole (docs/RationaleCommunication.md).

    With `zero=3` (ZeRO stage 3, FSDP's FULL_SHARD) the parameters are kept
    in their state's layout too: the step's parameter arguments and results
    and the gradient function's parameter arguments carry it, and no
    updated parameter is gathered. Inside the gradient function each
    parameter gets one `par.sharding_constraint` back to its own layout
    (an all_gather) before its first use in the forward (the ops the loss
    depends on) and another before its first use in the backward, each
    tagged `par.zero_gather = "forward"` or `"backward"` so that they stay
    two gathers (the forward's copy is freed after its last forward use).
    Under mixed precision a master weight's cast to the compute type runs
    on the shard and the 16-bit copy is gathered. The gradient is reduced
    into the split as with zero=1. Only the step may call the gradient
    function.

    For the GPT of examples/gen_transformer.py on dp=2 x tp=2 (AdamW):
    `#2 tensor<96x64xf32> [{}, {} ]: state [{"dp"}, {} ], 24576 bytes per
    rank (zero=0: 49152)`, one line per parameter, then the totals.

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
           "gradients">,
    Option<"zero", "zero", "int64_t", /*default=*/"0",
           "ZeRO stage: 0 (optimizer state sharded like its parameter), 1 "
           "(state and update also sharded over the data-parallel axes), 2 "
           "(gradients too: the same program as 1) or 3 (parameters too, "
           "gathered at their uses)">,
    ListOption<"zeroAxes", "zero-axes", "std::string",
               "zero>=1: the mesh axes to shard the state over (default: the "
               "axes the data arguments split dim 0 over)">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Print each step's optimizer state layout, its bytes per rank "
           "and the update's communication">
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::func::FuncDialect"];
}

#endif // PAR_TRAINING_PASSES_TD

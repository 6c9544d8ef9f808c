//===- Passes.td - Pipelining passes ------------------------------*- tablegen -*-===//

#ifndef PAR_PIPELINING_PASSES_TD
#define PAR_PIPELINING_PASSES_TD

include "mlir/Pass/PassBase.td"

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
    transfer agree (propagated as par-spmd does, on split constants: a
    shared zero init carries no split between its users). The module gets `par.pipeline`, a `#par.pipeline` with
    the split function and the stage table: per stage a `#par.stage`
    naming, by symbol, its `forward` and `loss` (and `input_loss`,
    `weight_loss`).

    With `split-backward=true` it also adds `@f_s<k>_bi` (k > 0) and
    `@f_s<k>_bw`, the same scalar with only the input, or only the
    parameters, marked: their gradients are the two halves of the backward
    that ZB-H1 schedules apart (`par.stage_part = "input"`/`"weight"`).

    ```mlir
    module attributes {par.pipeline = #par.pipeline<func = @loss, stages = [
        #par.stage<forward = @loss_s0_fwd, loss = @loss_s0>,
        #par.stage<forward = @loss_s1_fwd, loss = @loss_s1>]>}
    ```

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
    (lib/Pipelining/Schedule, docs/RationalePipeline.md) every pipeline rank's ordered
    list of actions for `schedule` (gpipe, 1f1b, interleaved with
    `virtual` > 1 stages per rank, zbh1 after
    `par-pipeline-split=split-backward=true`, zbv with both: two stages per
    rank in a V) and `micro-batches` m: forward and
    backward of (micro-batch, stage) and the sends and receives of
    activations and their gradients between ranks of the mesh axis `axis`
    (the stage count must be its size x virtual). The programs are proved
    deadlock-free under blocking send/recv before they are stored in the
    module's `#par.pipeline` (one `#par.program` per rank), with the
    schedule, the axis and the micro-batch count. It also completes the
    stage table from the links par-autodiff and par-optimizer recorded on
    each stage's functions (`backward`, `input_grad`, `weight_grad` from
    their `par.grad`, `update` from `par.update`) and records the split
    function's train step (`par.step`) and logits function (`par.logits`).
    With `diagram=true` it prints the schedule's timeline.

    ZB-V's orders are list-scheduled on the actions' costs, and stages
    differ (the first has no input gradient, so its BI is empty and its BW
    the whole backward; the last computes the loss). With `stage-costs`
    (the default) zbv weighs each stage's actions by its functions' cost
    (FLOPs + 4 per byte, OpCost.h, scaled to a mean forward of 1): F the
    forward, B the backward less its recomputed forward, BI the input
    gradient's likewise, BW = B - BI (the stash's halves). The other
    schedules' orders do not depend on costs; they keep unit costs.

    ```mlir
    #par.pipeline<func = @loss, stages = [#par.stage<forward = @loss_s0_fwd,
        loss = @loss_s0, backward = @loss_s0_grad, update = @loss_s0_update>,
        ...], step = @loss_step, schedule = "1f1b", axis = "pp",
        micro_batches = 4, programs = [#par.program<[fwd(mb=0, s=0),
        send_act(mb=0, s=1, to=1), ...]>, ...]>
    ```
  }];
  let options = [
    Option<"schedule", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "gpipe, 1f1b, interleaved, zbh1 or zbv">,
    Option<"microBatches", "micro-batches", "int64_t", /*default=*/"0",
           "Micro-batches per step (0: the train step's, as par-optimizer "
           "recorded it; 1 without a step)">,
    Option<"virtualStages", "virtual", "int64_t", /*default=*/"1",
           "Stages per rank (interleaved)">,
    Option<"axis", "axis", "std::string", /*default=*/"\"pp\"",
           "The pipeline mesh axis">,
    Option<"diagram", "diagram", "bool", /*default=*/"false",
           "Print the schedule's timeline">,
    Option<"stageCosts", "stage-costs", "bool", /*default=*/"true",
           "zbv: order by each stage's estimated action costs (false: unit "
           "costs)">
  ];
}

def VerifyPipeline : Pass<"par-verify-pipeline", "ModuleOp"> {
  let summary = "Proves the stored pipeline programs free of deadlock";
  let description = [{
    Runs `#par.pipeline`'s proof on the module's per-rank programs: it
    simulates them under blocking send/recv (lib/Pipelining/Schedule's verifier):
    every forward and backward present once, every send meeting the
    matching receive in order. A program that would hang is an error naming
    the two ranks and the actions they are blocked in. (The attribute's
    verifier runs the same proof whenever the attribute is parsed, so a
    hand edit that would hang does not get this far; the pass states the
    contract for a module built in memory.)
  }];
}

def PipelineStash : Pass<"par-pipeline-stash", "ModuleOp"> {
  let summary = "Splits each stage backward into a forward that keeps its residuals and the adjoints";
  let description = [{
    Runs on the propagated program (after sharding propagation and
    sequence parallelism, before partitioning). A stage's backward
    `f_s<k>_grad` is the stage's forward followed by its adjoints; run as
    the B action, it recomputes the forward the F action ran (B = F + 2F).
    For each stage of the module's `#par.pipeline`, the pass writes

    - `@f_s<k>_fwd_res(args..., [x]) -> (y, r...)`: the ops the stage's
      output y (the last stage's loss) depends on, returning y and the
      residuals r: the forward values the adjoints read;
    - `@f_s<k>_bwd(args..., [x], r..., [dy]) -> (0, grads..., [dx])`: the
      ops the gradients need, reading the residuals; its first result is a
      zero of the scalar's type (the caller reads the loss from F);
    - with ZB-H1's halves (the stage has `input_grad`/`weight_grad`), the
      backward split again: `@f_s<k>_bwd_input` (its arguments) -> (0,
      dx, s...), the ops dx depends on (BI: the output gradient carried
      back through the stage), and `@f_s<k>_bwd_weight(args..., [x],
      r..., s..., [dy]) -> (0, grads...)`, the weight gradients' ops on
      the residuals and the values s BI saved (each contraction's output
      gradient), so BI + BW is B; stage 0 has no dx: its BW is `_bwd`.

    Constants, empty tensors and side-effect-free ops computed from them
    and the parameters alone (mixed precision's weight casts) are not kept:
    they are recomputed where the backward needs them. A residual's
    sharding is its propagated sharding, without partial axes (it crosses
    reduced), on both sides. After par-recompute the residuals are what
    its policy saves: with `recompute=full` a layer's input, with
    `selective` all but the attention cores. The stage table records the
    two functions (`stash_forward`, `stash_backward`); par-run's executor
    then runs F as `_fwd_res`, keeps each micro-batch's residuals until its
    B, and runs B as `_bwd`. With `report`, prints each stage's residual
    count and global bytes.
  }];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Print each stage's residuals">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

#endif // PAR_PIPELINING_PASSES_TD

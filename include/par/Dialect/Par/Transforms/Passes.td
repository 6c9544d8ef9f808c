//===- Passes.td - Dialect/Par/Transforms passes ------------------*- tablegen -*-===//

#ifndef PAR_DIALECT_PAR_TRANSFORMS_PASSES_TD
#define PAR_DIALECT_PAR_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

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

def LocalRowIndex : Pass<"par-local-row-index", "ModuleOp"> {
  let summary = "Compares a split table's rows by their local index";
  let description = [{
    After partitioning. A vocabulary-parallel lookup (and its gradient)
    compares each local row's global number, an input that is this device's
    block of an iota (`par.all_slice` on dimension 0 of a generic yielding
    `linalg.index 0`), with the token. The block holds the rows off,
    off + 1, ... (off its first element), so `iota_shard[r] == X` is
    `linalg.index r == X - off`: the comparison is rewritten so, off read
    once before the generic, and the input is dropped. The generic is then
    the one-hot form par-one-hot-to-scatter makes a gather (the lookup) or
    a scatter (its gradient) of the one row, instead of a pass over every
    local row for every token: V/tp x tokens x h operations a micro-batch
    at GPT-2's vocabulary. Only an equality whose other side does not
    depend on the row loop is rewritten.

    ```mlir
    %s = par.all_slice %iota on @mesh axes = ["tp"] dim = 0 : tensor<256xi64> -> tensor<128xi64>
    // ins(%tok, %table, %s) ... %c = arith.cmpi eq, %s_r, %t : i64
    // -> ins(%tok, %table) ... %c = arith.cmpi eq, linalg.index 3, index_cast(%t - %s[0])
    ```
  }];
}

def SinkReductions : Pass<"par-sink-reductions", "ModuleOp"> {
  let summary = "Lets partial values flow through linear ops";
  let description = [{
    Runs on the partitioned program. A sum `par.all_reduce` moves past the
    ops that are linear in its result (add/sub of partial values reduced
    over the same axes, negation, products and quotients with values that
    are identical over those axes, casts, reshapes, transposes, selects on
    uniform conditions; linalg ops by their bodies), so that one reduction
    replaces several and reductions happen on the narrowest tensor. An
    `all_slice` of a reduced value becomes a `reduce_scatter`. A step is
    taken only if it does not increase the bytes sent (ring formulas) and a
    gain (a merge, fewer bytes) lies at or after it. With `across-calls`, a
    call result its callee returns all-reduced is reduced in the caller
    instead when a gain waits there (micro-batch gradients summed before one
    reduction); the call then targets a private clone `<callee>_partial`
    whose result sharding is partial. Likewise in a pipeline (`par.pipeline`):
    each stage's backward returns its parameter gradients unreduced (the
    pipeline driver sums them over the micro-batches) and the stage update
    reduces the sums, once per step.

    ```mlir
    %a = par.all_reduce %p on @mesh axes = ["tp"] kind = sum : tensor<8x64xf32>
    %b = par.all_reduce %q on @mesh axes = ["tp"] kind = sum : tensor<8x64xf32>
    %c = arith.addf %a, %b : tensor<8x64xf32>
    // => %s = arith.addf %p, %q; %c = par.all_reduce %s ... (one reduction)
    ```
  }];
  let options = [
    Option<"narrowDataParallel", "narrow-data-parallel", "bool",
           /*default=*/"false",
           "Let reductions over data-parallel axes move through narrowing "
           "casts too (grad-reduce=compute); by default master-weight "
           "gradients stay reduced in their type, as Megatron's "
           "accumulate-allreduce-grads-in-fp32">,
    Option<"acrossCalls", "across-calls", "bool", /*default=*/"true",
           "Also reduce call results in the caller when that gains, and "
           "pipeline stage gradients in the stage update">,
    Option<"stepGradients", "step-gradients", "bool", /*default=*/"false",
           "Reduce every gradient a train step's call returns reduced in "
           "the step itself, gain or not (for par-compress-gradients, "
           "which rewrites the step's reductions)">
  ];
  let statistics = [
    Statistic<"numSunk", "sunk", "Reductions moved past a linear op">,
    Statistic<"numMerged", "merged", "Reductions merged into another">,
    Statistic<"numScattered", "scattered",
              "Reductions turned into reduce_scatters">,
    Statistic<"numAcrossCalls", "across-calls",
              "Call results reduced in the caller">,
    Statistic<"numAcrossStages", "across-stages",
              "Stage gradients reduced in the stage update">
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

def SequenceParallel : Pass<"par-sequence-parallel", "ModuleOp"> {
  let summary = "Splits the residual stream's sequence over the tensor-parallel axis";
  let description = [{
    Megatron sequence parallelism (Korthikanti et al. 2022) as shardings.
    Runs after propagation has decided the tensor-parallel layout. Between a
    reduction over the axis (the output of a row-parallel projection, or in
    the backward the input gradient of column-parallel ones) and the next op
    that needs the value whole over the axis (a column-parallel projection,
    a reshape merging the sequence away, a result), the [batch, sequence,
    hidden] activations and the row-wise ops on them (LayerNorm, residual
    adds, dropout, casts) are replicated over the axis. This pass finds that
    region, splits each of its values' sequence dim (dim 1 of the rank-3
    activations) over the axis, seals its borders with `par.reshard` ops
    (into it: to the split; out of it: back to the sharding propagation
    chose) and propagates again. Partitioning turns a border into an
    all_gather (out) or a local slice, which par-sink-reductions merges with
    a row-parallel output's all_reduce into a reduce_scatter (in). Gradients
    reduced over the sequence inside the region (LayerNorm parameters) stay
    partial over the axis and are all-reduced. Fails, naming the reason,
    when no mesh has the axis, no reduction over it reaches a rank-3
    activation, or the axis does not divide a sequence length.

    ```mlir
    // tp=2: the residual add runs on [4, 8/2, 16] blocks
    %s = par.reshard %out_proj <@mesh, [{"dp"}, {"tp"}, {} ]> : tensor<4x8x16xf32>
    %h = linalg.generic ... ins(%x, %s ...)   // [{"dp"}, {"tp"}, {} ]
    %g = par.reshard %ln <@mesh, [{"dp"}, {}, {} ]> : tensor<4x8x16xf32>
    ```
  }];
  let options = [
    Option<"axis", "axis", "std::string", /*default=*/"\"tp\"",
           "The tensor-parallel mesh axis the sequence is split over">
  ];
  let dependentDialects = ["::mlir::par::ParDialect"];
  let statistics = [
    Statistic<"numSplit", "split", "Values whose sequence dim is split">,
    Statistic<"numEntries", "entries", "Reshards into a region">,
    Statistic<"numExits", "exits", "Reshards out of a region">
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

def StripShardings : Pass<"par-strip-shardings", "ModuleOp"> {
  let summary = "Removes every sharding: the unsharded reference program";
  let description = [{
    Drops `par.sharding` attributes, replaces `par.sharding_constraint` and
    `par.reshard` by their operands and removes meshes. The result is the
    same program on one device; `par-compile` builds it next to the sharded
    one so that `par-run --verify` can compare them on the same inputs.
  }];
}

#endif // PAR_DIALECT_PAR_TRANSFORMS_PASSES_TD

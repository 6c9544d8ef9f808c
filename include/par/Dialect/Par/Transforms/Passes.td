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

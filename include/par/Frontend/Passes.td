//===- Passes.td - Frontend normalisation passes -------------*- tablegen -*-===//
//
// torch-mlir's linalg-on-tensors output brought to the forms par-autodiff
// and the sharding rules take. Each pass preserves semantics (the
// `par-normalize-torch` pipeline of them always runs in par-compile) and
// keeps an op's `par.stage` on the ops that replace it.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_FRONTEND_PASSES_TD
#define PAR_FRONTEND_PASSES_TD

include "mlir/Pass/PassBase.td"

def ExpandFPowI : Pass<"par-expand-fpowi", "::mlir::func::FuncOp"> {
  let summary = "Expands math.fpowi with a constant exponent into multiplications";
  let description = [{
    torch-mlir lowers `x ** n` (MSE's square, HF's gelu_new cube) to
    `math.fpowi %x, %n`, which par-autodiff has no tangent rule for. With a
    constant exponent (an `arith.constant` anywhere, typically outside the
    generic's body) it becomes square-and-multiply: `x^0 = 1`, `x^n` for
    n > 0 the product, `x^-n = 1 / x^n`. The multiplications differentiate
    and partition like any other body op. An exponent that is not a
    constant is an error naming the op and its location.

    ```mlir
    %y = math.fpowi %x, %c3 : f32, i64
    // =>
    %sq = arith.mulf %x, %x : f32
    %y = arith.mulf %sq, %x : f32
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def DecomposePad : Pass<"par-decompose-pad", "::mlir::func::FuncOp"> {
  let summary = "Rewrites tensor.pad with a constant value as fill + insert_slice";
  let description = [{
    HF's causal LM loss shifts the labels with `tensor.pad ... -100`; par
    has no sharding rule or adjoint for tensor.pad but has both for
    `linalg.fill` and `tensor.insert_slice`. A pad whose yielded value is
    defined outside its region (a constant) becomes a fill of the padded
    shape with that value and an insert_slice of the source at the low
    padding (upstream's DecomposePadOpPattern). A pad whose value depends
    on the position is left alone (par then names it as an op without a
    sharding rule).

    ```mlir
    %p = tensor.pad %l low[0, 0] high[0, 1] { ^bb0(%i: index, %j: index):
      tensor.yield %c-100 : i64 } : tensor<4x31xi64> to tensor<4x32xi64>
    // =>
    %e = tensor.empty() : tensor<4x32xi64>
    %f = linalg.fill ins(%c-100 : i64) outs(%e : tensor<4x32xi64>) -> tensor<4x32xi64>
    %p = tensor.insert_slice %l into %f[0, 0] [4, 31] [1, 1] : tensor<4x31xi64> into tensor<4x32xi64>
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def EraseDeadResults : Pass<"par-erase-dead-results", "::mlir::func::FuncOp"> {
  let summary = "Drops linalg.generic results nothing reads (torch's dead argmax)";
  let description = [{
    torch-mlir decomposes softmax's and log_softmax's `amax` into a
    two-result reduction: the maximum and its argmax (`arith.select` of
    `linalg.index`). The argmax is never used, but it blocks both the
    sharding rule (an index read through `linalg.index` must see global
    indices, and a select is no known combiner: the reduced dimension could
    not be split, so a vocab-sharded softmax would be all-gathered) and
    autodiff's view of the reduction. A generic result without uses whose
    yielded value is computed only from its own accumulator, the block's
    inputs and values no other result needs is removed together with its
    init and the body ops only it used. The remaining `maximumf` reduction
    has a sharding rule (an all-reduce max when the dimension is split) and
    an adjoint (par-autodiff: the gradient goes to the maxima, as torch's
    amax).

    ```mlir
    %m:2 = linalg.generic ... outs(%max0, %idx0 : tensor<128xf32>, tensor<128xi64>) {
      ... arith.maximumf ...; arith.select %gt, %i, %out_idx : i64 ...
    }   // %m#1 unused
    // => a one-result generic yielding the maximumf
    ```
  }];
}

def FoldUnitDims : Pass<"par-fold-unit-dims", "::mlir::func::FuncOp"> {
  let summary = "Folds unit-extent dims of linalg ops (torch's keepdim reductions)";
  let description = [{
    torch-mlir's keepdim reductions and their broadcasts index the unit
    dimension with a constant: `affine_map<(d0, d1, d2) -> (d0, d1, 0)>`,
    which par-autodiff cannot transpose. Upstream's unit-extent folding
    (`linalg-fold-unit-extent-dims` patterns, reassociative reshapes, and
    inits moved to inputs where the body reads them) drops the unit
    dimensions and their loops, leaving projected permutations and
    `tensor.expand_shape` / `tensor.collapse_shape` around the ops (both
    have sharding rules and adjoints). An op's `par.stage` goes to the ops
    that replace it.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::affine::AffineDialect"];
}

def RewriteRowGather : Pass<"par-rewrite-row-gather", "::mlir::func::FuncOp"> {
  let summary = "Rewrites a gather from a computed tensor as compare-select-sum";
  let description = [{
    Cross-entropy picks each row's target log-probability with a generic
    whose body is `tensor.extract %logp[linalg.index 0, index_cast(%t)]`.
    A tensor read from above has no sharding rule but "replicated": a
    vocab-sharded `logp` would be all-gathered (B·S·V elements a step). When
    the table is computed, or a function argument whose `par.sharding`
    splits the gathered dimension (a vocabulary-parallel embedding table:
    each rank sums its own rows, Megatron's masked lookup, and the split
    sum is one all-reduce; other embedding tables keep their gather and its
    scatter-add adjoint), exactly one index is
    data-dependent and the body yields the extracted value, the generic
    becomes a reduction over that table dimension: the table is an input,
    an iota over the dimension another, and the body sums
    `select(iota == index, table, 0)`. The result is the same (each row has
    one hit), split reductions over the vocab are an all-reduce of one
    value per row, and the adjoint is an ordinary elementwise select. The
    body's other ops (the `cf.assert` range checks) stay, so an
    out-of-range target still stops the program.

    ```mlir
    %g = linalg.generic {maps = [(d0) -> (d0), (d0) -> (d0)], ["parallel"]}
        ins(%t : tensor<128xi64>) outs(%e : tensor<128xf32>) {
      %i = linalg.index 0 : index
      %j = arith.index_cast %in : i64 to index
      %x = tensor.extract %logp[%i, %j] : tensor<128x96xf32>
      linalg.yield %x : f32 }
    // =>
    %g = linalg.generic {maps = [(d0, d1) -> (d0), (d0, d1) -> (d0, d1),
        (d0, d1) -> (d1), (d0, d1) -> (d0)], ["parallel", "reduction"]}
        ins(%t, %logp, %iota : ...) outs(%zeros : tensor<128xf32>) {...}
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
}

def ExpandBatchMatmul : Pass<"par-expand-batch-matmul", "::mlir::func::FuncOp"> {
  let summary = "Expands a bmm over collapsed batch dims into a contraction over them";
  let description = [{
    torch has no 4-d batched matmul: attention's `q @ k^T` and `p @ v`
    (eager, or par-import's scaled_dot_product_attention decomposition)
    collapse [batch, heads] into one dim, `linalg.batch_matmul`, and expand
    the result back. Under dp × tp the batch dim is sharded over "dp" and
    the heads over "tp"; the collapsed dim's elements of one device are no
    block of it, so the partitioner all-gathered the heads before every
    attention matmul. When both operands are `tensor.collapse_shape`s with
    reassociation [[0..k-1], [k], [k+1]] (one float type), the bmm becomes a `linalg.generic` contraction over
    (b.., m, n, r) on the uncollapsed operands (body mulf, addf; a fill
    init is refilled in the expanded shape, another init expanded); users
    that expanded the bmm's result back take the generic's result, others
    its collapse. Each batch dim then keeps its own sharding, and the
    adjoint is two contractions of the same form.

    The operands may merge different batch shapes: GQA's `p @ v` collapses
    the probabilities from [batch, heads] and v, repeated over the heads of
    its key/value group, from [batch, kv heads, repeats]. The generic then
    runs over the finest shape all of them (and the result's expands) are
    merges of, [batch, kv heads, repeats]; an operand (or expand) that
    merged dims of it is expanded (collapsed) to it. The same numbers in the
    same order per output element.

    ```mlir
    %a = tensor.collapse_shape %q [[0, 1], [2], [3]] : tensor<8x4x32x16xf32> into tensor<32x32x16xf32>
    %b = tensor.collapse_shape %kt [[0, 1], [2], [3]] : tensor<8x4x16x32xf32> into tensor<32x16x32xf32>
    %c = linalg.batch_matmul ins(%a, %b : ...) outs(%zero : tensor<32x32x32xf32>) -> tensor<32x32x32xf32>
    %s = tensor.expand_shape %c [[0, 1], [2], [3]] output_shape [8, 4, 32, 32] : ...
    // =>
    %s = linalg.generic {maps = [(b0, b1, m, n, r) -> (b0, b1, m, r),
        (b0, b1, m, n, r) -> (b0, b1, r, n), (b0, b1, m, n, r) -> (b0, b1, m, n)],
        ["parallel" x 4, "reduction"]} ins(%q, %kt) outs(%zero4) {mulf, addf}
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
}

#endif // PAR_FRONTEND_PASSES_TD

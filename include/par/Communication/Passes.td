//===- Passes.td - Communication passes --------------------*- tablegen -*-===//
//
// The passes of lib/Communication: where the program communicates and how
// its collectives travel. Before partitioning, Megatron's sequence
// parallelism (par-sequence-parallel); on the partitioned program,
// reductions sunk past linear ops (par-sink-reductions), gradient
// reductions in 16 bits or compressed, buckets, and the bytes report;
// after bufferization, asynchronous starts and waits.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_COMMUNICATION_PASSES_TD
#define PAR_COMMUNICATION_PASSES_TD

include "mlir/Pass/PassBase.td"

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


def GradientReducePrecision : Pass<"par-gradient-reduce-precision", "ModuleOp"> {
  let summary = "Reduces mixed precision's data-parallel gradients in 16 bits";
  let description = [{
    Runs on the partitioned program. In a mixed-precision program
    (`par.mixed_precision` on the forward) the gradients of the f32 master
    weights are reduced over the data-parallel axes in f32 (Megatron's
    accumulate-allreduce-grads-in-fp32, par's default). This pass makes
    those reductions run in the compute type, as PyTorch DDP's fp16/bf16
    compression hooks do: each device rounds its partial gradient, the
    all_reduce moves half the bytes, the sum is widened back. Rewritten: in
    each gradient function (the forward's `par.grad`), its train step
    (`par.step`) and the functions the step calls, every f32 sum
    `par.all_reduce` of rank >= 1 whose axes all split dim 0 of the
    forward's data arguments. The loss and other scalars stay f32.

    ```mlir
    %g = par.all_reduce %p on @mesh axes = ["dp"] kind = sum : tensor<16x64xf32>
    // => %h = truncf(%p) : bf16; %r = par.all_reduce %h ... : tensor<16x64xbf16>
    //    %g = extf(%r)
    ```
  }];
  let statistics = [
    Statistic<"numRewritten", "rewritten", "All-reduces moved to 16 bits">
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
}

def CompressGradients : Pass<"par-compress-gradients", "ModuleOp"> {
  let summary = "Compresses the data-parallel gradient reductions";
  let description = [{
    Runs on the partitioned program, after par-sink-reductions has brought
    the data-parallel gradient reductions into the train step (the function
    with `par.feedback`) and the pipeline stage updates. In each, the sum
    `par.all_reduce`s over data-parallel axes (not the loss's) are grouped
    in program order into buckets of at most `bucket-bytes` whose members
    vary over the same other mesh axes (by the shardings they come from: a
    gradient replicated over "tp" never shares a bucket with a tp-split one,
    so that its replicas get the same scales), flattened into one f32 vector
    per bucket and exchanged compressed, in ordinary tensor ops and par
    collectives (docs/RationaleCompression.md):

    - `int8`: per chunk of `chunk` elements a scale max|x|/127 and
      round-to-nearest-even codes; two phases as 1-bit Adam's compressed
      all-reduce: all_to_all of the codes and scales (each device owns 1/n
      of the vector), the owned part decompressed and summed, compressed
      again, all_gather. 2(n-1)/n * P * (1 + 4/chunk) bytes for P padded
      elements.
    - `sign`: the signs, 8 per byte, and per chunk the scale mean|x|; the
      same two phases. 2(n-1)/n * P * (1/8 + 4/chunk) bytes.
    - `topk`: the k = ceil(ratio * N) largest magnitudes of the bucket
      (ties: lowest index first), values and i32 indices all_gathered and
      added. (n-1) * k * 8 bytes.

    With `error-feedback` (default), each compression point keeps what it
    dropped: e = x + e_prev, send C(e), e_prev' = e - D(C(e)). The buffers
    are new state arguments and results of the function (`par.error_feedback`,
    zeros at first, one row per device, fed back like optimizer state; kept
    on a step the loss scale skips). Under loss scaling the unscaled
    gradients are compressed. Gradients with fewer than `min-elements`
    elements stay uncompressed. With `warmup=W` the first W steps reduce
    uncompressed (an `scf.if` on a step counter added as state,
    `par.compression_step`), the buffers untouched. The function gets a
    `par.compression`
    summary (method, bytes per step of the compressed exchanges and of the
    fp32 ring all-reduces they replace).

    ```mlir
    %g = par.all_reduce %p on @mesh axes = ["dp"] kind = sum : tensor<64x32xf32>
    // becomes (int8, n = 2): e = p + e1; codes/scales; par.all_to_all of
    // tensor<2x1024xi8> and tensor<2x2xf32>; owned sum; e2; par.all_gather
    // of tensor<1024xi8> and tensor<2xf32>; decompressed, reshaped back
    ```
  }];
  let options = [
    Option<"method", "method", "std::string", /*default=*/"\"int8\"",
           "int8, sign or topk">,
    Option<"ratio", "ratio", "double", /*default=*/"0.01",
           "topk: the fraction of each bucket's elements sent, in (0, 1)">,
    Option<"chunk", "chunk", "int64_t", /*default=*/"512",
           "int8, sign: elements per scale (a multiple of 8 for sign)">,
    Option<"errorFeedback", "error-feedback", "bool", /*default=*/"true",
           "Keep what compression dropped and add it back the next step">,
    Option<"minElements", "min-elements", "int64_t", /*default=*/"0",
           "Gradients with fewer elements stay uncompressed">,
    Option<"warmup", "warmup", "int64_t", /*default=*/"0",
           "Steps that reduce uncompressed first (a step counter becomes "
           "state, par.compression_step), as 1-bit Adam's warm-up">,
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"26214400",
           "Largest bucket in local bytes (0: every gradient alone)">
  ];
  let dependentDialects = ["::mlir::par::ParDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect"];
  let statistics = [
    Statistic<"numBuckets", "buckets", "Compressed exchanges made">,
    Statistic<"numCompressed", "compressed", "Gradient reductions compressed">
  ];
}

def BucketReductions : Pass<"par-bucket-reductions", "ModuleOp"> {
  let summary = "Groups all-reduces into buckets sent as one message";
  let description = [{
    PyTorch DDP's gradient buckets and XLA's all-reduce combiner, on the
    partitioned program: in each block, in program order (the order the
    backward produces gradients), `par.all_reduce` ops with the same mesh,
    axes, kind and element type and static shapes are gathered into
    buckets of at most `bucket-bytes` local bytes; each bucket of two or
    more becomes one `par.bucket_all_reduce` at the position of its last
    member. A bucket closes when the next member would exceed the cap, or
    as soon as an op uses the result of one of its members (moving the
    earlier reductions down to the last one must keep every use after its
    definition), or at a `par.send`/`par.recv` (point-to-point traffic
    keeps its order relative to the reductions). A member larger than the
    cap, and a bucket left with one member, stay a plain `par.all_reduce`.
    `bucket-bytes=0` leaves the program unchanged.

    ```mlir
    %a = par.all_reduce %ga on @mesh axes = ["dp"] kind = sum : tensor<64x32xf32>
    %b = par.all_reduce %gb on @mesh axes = ["dp"] kind = sum : tensor<64xf32>
    // becomes
    %r:2 = par.bucket_all_reduce %ga, %gb on @mesh axes = ["dp"] kind = sum : tensor<64x32xf32>, tensor<64xf32>
    ```
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"26214400",
           "Largest bucket in local bytes (DDP's 25 MiB); 0 disables bucketing">
  ];
  let dependentDialects = ["::mlir::par::ParDialect"];
  let statistics = [
    Statistic<"numBuckets", "buckets", "Buckets made">,
    Statistic<"numBucketed", "bucketed", "All-reduces moved into buckets">
  ];
}

def AsyncCollectives : Pass<"par-async-collectives", "ModuleOp"> {
  let summary = "Splits buffer all-reduces into start and wait around compute";
  let description = [{
    After bufferization, each `par.buffer_bucket_all_reduce` (and, with
    `all-reduces`, each plain `par.buffer_all_reduce`) becomes a
    `par.buffer_all_reduce_start` at its place and a `par.buffer_wait`
    right before the first later op of the same block that may write one
    of its inputs or read or write one of its outputs, or an alias of them
    (buffers are traced through view-like ops to their allocation; function
    arguments may alias each other, anything else untraceable may alias
    everything), and before any op with unknown memory effects (calls) or
    the block's terminator at the latest. The compute in between overlaps
    the transfer. Where only allocations, views and constants would sit in
    between, the op stays blocking (a backend's blocking collective is
    cheaper than a start waited for at once). Runs before the buffer
    deallocation pipeline, so that deallocations land after the wait.

    ```mlir
    par.buffer_bucket_all_reduce ins(%a : memref<64xf32>) outs(%r : memref<64xf32>) on @mesh axes = ["dp"] kind = sum
    linalg.generic ... ins(%x) outs(%y)      // touches neither %a nor %r
    memref.copy %r, %z : ...
    // becomes
    %h = par.buffer_all_reduce_start ins(%a : memref<64xf32>) outs(%r : memref<64xf32>) on @mesh axes = ["dp"] kind = sum
    linalg.generic ... ins(%x) outs(%y)
    par.buffer_wait %h ins(%a : memref<64xf32>) outs(%r : memref<64xf32>)
    memref.copy %r, %z : ...
    ```
  }];
  let options = [
    Option<"allReduces", "all-reduces", "bool", /*default=*/"false",
           "Also split plain par.buffer_all_reduce ops">,
    Option<"always", "always", "bool", /*default=*/"false",
           "Split even where no work would sit between start and wait">
  ];
  let dependentDialects = ["::mlir::par::ParDialect"];
  let statistics = [
    Statistic<"numStarted", "started", "Collectives made asynchronous">,
    Statistic<"numOverlapped", "overlapped",
              "Of those, with at least one op between start and wait">,
    Statistic<"numKeptBlocking", "kept-blocking",
              "Left blocking: no work before their first conflicting access">
  ];
}

def ZeroPrefetch : Pass<"par-zero-prefetch", "ModuleOp"> {
  let summary = "Starts ZeRO-3's parameter gathers one group ahead of their use";
  let description = [{
    After bufferization, each `par.buffer_all_gather` tagged
    `par.zero_gather` (ZeRO-3's gather of a parameter shard before its
    forward or backward use) becomes a `par.buffer_all_gather_start` issued
    early and a `par.buffer_wait` at the gather's place, right before the
    gathered buffer's first use; its output allocation moves with the
    start. The compute in between overlaps the transfer (FSDP's
    `forward_prefetch` / `backward_prefetch`).

    How early, one group ahead: the tagged gathers of a block form groups,
    runs of gathers with no compute between them (only allocations, views,
    constants, other gathers: a layer's parameters gathered together, or one
    gather where the uses are spread). The starts of group k go right after the waits of
    group k-1, that is, while group k-1's parameters are in use; group 0's
    go as early as their operands allow. So at most one group is in flight
    ahead of the compute and at most two groups' gathered copies are live
    beyond what the blocking program holds. Never above an op that may
    write the shard (or an alias), read or write the gathered buffer, has
    unknown memory effects (calls), or defines the shard. A gather whose
    output is not a static allocation of its block used only after it, or
    with no compute between its start's place and itself, stays blocking.

    ```mlir
    %g0 = memref.alloc() : memref<32x32xf32>
    par.buffer_all_gather %w0, %g0 on @mesh axes = ["dp"] dim = 0 {par.zero_gather = "forward"} : memref<16x32xf32>, memref<32x32xf32>
    linalg.matmul ins(%x, %g0 : ...) outs(%y : ...)
    %g1 = memref.alloc() : memref<32x32xf32>
    par.buffer_all_gather %w1, %g1 on @mesh axes = ["dp"] dim = 0 {par.zero_gather = "forward"} : memref<16x32xf32>, memref<32x32xf32>
    linalg.matmul ins(%y, %g1 : ...) outs(%z : ...)
    // becomes (the first gather has no compute before it: it stays)
    %g0 = memref.alloc() : memref<32x32xf32>
    par.buffer_all_gather %w0, %g0 on @mesh axes = ["dp"] dim = 0 {par.zero_gather = "forward"} : ...
    %g1 = memref.alloc() : memref<32x32xf32>
    %h1 = par.buffer_all_gather_start %w1, %g1 on @mesh axes = ["dp"] dim = 0 : ...
    linalg.matmul ins(%x, %g0 : ...) outs(%y : ...)      // overlaps %h1
    par.buffer_wait %h1 ins(%w1 : ...) outs(%g1 : ...)
    linalg.matmul ins(%y, %g1 : ...) outs(%z : ...)
    ```

    Runs after par-async-collectives and before the buffer deallocation
    pipeline (the gathered copy is then freed after its last use, as
    before; the memory plan sees it live from the start).
  }];
  let dependentDialects = ["::mlir::par::ParDialect"];
  let statistics = [
    Statistic<"numStarted", "started", "ZeRO-3 gathers made asynchronous">,
    Statistic<"numKeptBlocking", "kept-blocking",
              "Left blocking: no compute to overlap, or the output is not a "
              "static allocation used only after the gather">
  ];
}

def CommReport : Pass<"par-comm-report", "ModuleOp"> {
  let summary = "Prints the bytes each device sends per collective";
  let description = [{
    For each function, lists every collective with its mesh axes, group
    size, element type and the bytes one device sends per call under the ring
    formulas (all_reduce 2(n-1)/n S, all_gather and reduce_scatter and
    all_to_all (n-1)/n S with S the larger of the input and result, broadcast
    and send S), followed by the function's total. A `par.bucket_all_reduce`
    is one collective (one message) with the bytes of its members together
    and shows how many members it has instead of a type. Collectives inside
    loops are counted once per appearance. The IR is left unchanged.

    ```
    par-comm-report: @forward
      par.all_reduce axes=["tp"] n=4 f32 tensor<8x16xf32>: 768 bytes
      par.bucket_all_reduce axes=["dp"] n=2 f32 16 tensors: 123456 bytes
      total: 2 collectives, 124224 bytes per device
    ```
  }];
  let options = [
    Option<"outputFile", "output", "std::string", /*default=*/"\"-\"",
           "Where to write the report ('-' for stdout)">
  ];
}

#endif // PAR_COMMUNICATION_PASSES_TD

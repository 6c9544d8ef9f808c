//===- Passes.td - Codegen/CPU passes -----------------------------*- tablegen -*-===//

#ifndef PAR_CODEGEN_CPU_PASSES_TD
#define PAR_CODEGEN_CPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def DecomposeAggregatedOps : Pass<"par-decompose-aggregated-ops", "ModuleOp"> {
  let summary = "Rewrites aggregated linalg ops (softmax) into structured ops";
  let description = [{
    Ops implementing `linalg::AggregatedOpInterface` (e.g. `linalg.softmax`)
    are replaced by their decomposition (reductions and elementwise
    generics) on tensors, so that they bufferize and lower to loops like
    any other structured op. Runs after partitioning: sharding works on the
    aggregated op, whose rule is simpler. par's loss-scaling ops go the same
    way: `par.scale_loss` forwards its loss, `par.all_finite` (partitioned:
    this device's check) becomes a min-reduction of `|x| < inf` per input,
    `par.update_loss_scale` scalar arithmetic.
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

def FuseReductions : Pass<"par-fuse-reductions", "ModuleOp"> {
  let summary = "Tiles chains of generics with reductions into one loop nest";
  let description = [{
    Each chain of `linalg.generic`s on tensors that holds a reduction
    (LayerNorm, softmax, cross-entropy, and their backwards: reductions over
    a row and the elementwise ops that read their results broadcast back)
    becomes one `scf.forall` over blocks of rows. The chain's last op (the
    root) is tiled along its parallel loops but the innermost (which stays
    whole: the reductions run along it), the innermost tiled loop in blocks
    of rows of about `tile-elements` elements, and its producers are fused
    into the loop by `scf::tileConsumerAndFuseProducersUsingSCF`. A producer
    joins when its tile is disjoint across iterations (the consumer reads it
    through every tiled loop, none of them a reduction of the producer), so
    fusion never recomputes an element; a producer also used outside the
    chain is computed in the loop once and yielded whole. Contractions
    (matmuls) are never fused: they keep the BLAS path. Plain elementwise
    chains are `par-fuse-elementwise`'s.
  }];
  let options = [
    Option<"tileElements", "tile-elements", "int64_t", /*default=*/"8192",
           "About how many elements of the root one tile computes">,
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::affine::AffineDialect"];
}

def FastMath : Pass<"par-fast-math", "ModuleOp"> {
  let summary = "Reassociates float reductions and approximates exp/log";
  let description = [{
    Two licences with float arithmetic, each an option, both on by default
    (par-compile `fp-reassociate`, `math-approx`; see
    docs/RationaleCPUKernels.md for the error each allows):
    `reassociate` sets `reassoc` on the float combiners in
    the bodies of linalg ops with reduction loops, so that LLVM vectorises
    those loops (partial sums per vector lane, fused multiply-adds), as
    PyTorch's CPU kernels do; `approximate` expands `math.tanh` to exp and
    rewrites f32 `math.exp` and `math.log` into MLIR's polynomial
    approximations, which vectorise (libm's are one call per element).
  }];
  let options = [
    Option<"reassociate", "reassociate", "bool", /*default=*/"true",
           "Reassociate float reductions (reassoc)">,
    Option<"approximate", "approximate", "bool", /*default=*/"true",
           "exp and log (f32) as polynomial approximations">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::vector::VectorDialect"];
}

def OneHotToScatter : Pass<"par-one-hot-to-scatter", "ModuleOp"> {
  let summary = "Writes one-hot row accumulations (embedding gradients) as scatter-adds";
  let description = [{
    par-autodiff writes a gather's adjoint (an embedding table's gradient)
    as a one-hot accumulation: a generic with a parallel loop r over the
    table's rows that adds `v` to `out[r, ...]` where `linalg.index r`
    equals the token, costing rows x (batch x sequence x width)
    iterations. On buffers, this pass drops the loop r and adds `v` to the
    one row the comparison selects, if it is in range: batch x sequence x
    width iterations, the same additions in the same order (bit-identical
    results). Matched: a generic on buffers with one output, a loop r read
    once by `arith.cmpi eq` against an r-free value, whose one use is
    `select(cmp, v, 0)` (or `v * select(cmp, 1, 0)`) added to the output
    and yielded; r parallel, the output indexed by it and no input (a
    scatter), or r the one reduction, the output not indexed by it (a
    gather: a split table's lookup after par-local-row-index, `v` read
    from the table at the selected row). Runs before
    par-parallelize-loops.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::affine::AffineDialect",
                           "::mlir::memref::MemRefDialect"];
}

def ParallelizeLoops : Pass<"par-parallelize-loops", "ModuleOp"> {
  let summary = "Lowers linalg on buffers to loops, the big ones parallel";
  let description = [{
    What `convert-linalg-to-loops` does, choosing which loops a rank's
    threads share: an op with at least `min-iterations` iterations whose
    outermost loop is parallel gets its parallel loops as one
    `scf.parallel`; every `scf.forall` (par-fuse-reductions' chains) with
    that much work becomes `scf.parallel`, the others nested `scf.for`.
    A loop nested in a parallel one stays sequential (one OpenMP region,
    never nested ones). Only parallel dimensions are shared, never a
    reduction, so the results are bit-identical at every thread count.
    With `threads=false` every loop is sequential. `convert-scf-to-openmp`
    then makes the parallel loops OpenMP worksharing loops.
  }];
  let options = [
    Option<"minIterations", "min-iterations", "int64_t", /*default=*/"32768",
           "Iterations an op (or a forall's whole body) needs to run parallel">,
    Option<"threads", "threads", "bool", /*default=*/"true",
           "Emit parallel loops at all">,
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::affine::AffineDialect"];
}

def OutlineKernels : Pass<"par-outline-kernels", "ModuleOp"> {
  let summary = "Outlines each kernel into a function, identical ones once";
  let description = [{
    After bufferization and the BLAS/runtime rewrites: every remaining
    kernel (a `linalg` op on buffers, or a fused chain's `scf.forall`) that
    is not nested in another becomes a call to a private function holding
    it. Kernel functions are keyed by their printed form (ops, attributes,
    shapes and element types, the name left out): identical kernels (the L
    layers' forward, backward and same-shaped parameter updates) are one
    function, so LLVM optimises and generates each distinct kernel once
    and the step functions become sequences of calls. Constants the kernel
    reads are cloned into it (trip counts stay static); other values it
    reads are arguments. Kernel functions carry `par.kernel` and
    `no_inline` (par-emit-packed-entry keeps the latter through the LLVM
    dialect, so LLVM leaves them out of line). `report=true`
    prints the kernels: total, distinct, and the biggest.

    `profile=true` (the default) brackets each kernel's body with the
    runtime profiler's hooks (`par_rt_k_profile_begin` on entry,
    `par_rt_k_profile_end(name, start)` before the return, the name an
    internal string global): `par-run --profile` then times every kernel
    by name; while the profiler is off a hook is a load and a branch.
  }];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Print the kernel counts">,
    Option<"profile", "profile", "bool", /*default=*/"true",
           "Bracket each kernel with the runtime profiler's hooks">,
  ];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

def DonateBuffers : Pass<"par-donate-buffers", "ModuleOp"> {
  let summary = "Updates parameters and optimizer state in their own buffers";
  let description = [{
    On tensors, before bufferization. A train step's results that feed its
    arguments (`par.feedback`) and a pipeline stage update's new parameters
    and state (result j for argument j, result P + k for argument 2P + k,
    P the stage's parameters) are donated: the function gets
    `par.donated` (result, argument) pairs, which the manifest carries, and
    the runner passes the argument's buffer for the result too, so it keeps
    one buffer set for the parameters and state instead of two
    (docs/RationaleMemory.md, "Donated buffers"). When a donated result is
    computed by a `linalg.generic` that writes it through the identity map
    without reading its init (the optimizer's update), the init becomes the
    argument, so that one-shot bufferization computes it in place; a result
    it cannot place is copied into the argument at the return
    (`par-return-donated`). A pair needs the same type on both sides and
    each result and argument at most once. A function that has
    `par.donated` keeps its pairs: par-compile runs the pass before the
    manifest (which records them) and again just before bufferization,
    since elementwise fusion replaces unread inits with `tensor.empty`.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def ReturnDonated : Pass<"par-return-donated", "ModuleOp"> {
  let summary = "Makes each donated result its argument's buffer";
  let description = [{
    After one-shot bufferization (results returned as memrefs), for each
    `par.donated` (result, argument) pair: a returned buffer that is not
    the argument is copied into it before the return, which then returns
    the argument. Sources that are themselves donated arguments (or views
    of one) are copied aside first, so no pair reads a buffer another pair
    has written. Removes the attribute. Then (for a function nothing in the
    module calls) the donated results leave the function until the run
    with `restore`, after the deallocation passes, puts them back returning
    their arguments: returned arguments would be retained by every
    `bufferization.dealloc`, whose simplification compares each pair
    (quadratic in the parameter count: minutes on GPT-2's 196 parameters).
  }];
  let options = [
    Option<"restore", "restore", "bool", /*default=*/"false",
           "Put back the donated results the first run took out">,
  ];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def SplitDeallocs : Pass<"par-split-deallocs", "ModuleOp"> {
  let summary = "Splits off the deallocations that alias no retained buffer";
  let description = [{
    After `ownership-based-buffer-deallocation`, before
    `buffer-deallocation-simplification`: a straight-line function ends in
    one `bufferization.dealloc` of every buffer it allocated, retaining
    every buffer it returns, and upstream's simplification proves the
    pairs apart one by one (quadratic: 19 s of a 24-layer GPT's compile).
    This pass does the common case in linear time: each buffer is traced
    to the allocation it views (through view-like ops); a deallocated
    buffer whose allocation is no retained buffer's, and no other
    deallocated buffer's, gets a `bufferization.dealloc` of its own without
    retained values. Anything it cannot trace (arguments, call and region
    results) stays where it was, for upstream's simplification to handle.
  }];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect"];
}

def DeallocAfterLastUse : Pass<"par-dealloc-after-last-use", "ModuleOp"> {
  let summary = "Frees each buffer right after its last use";
  let description = [{
    After the buffer deallocation pipeline's simplification: ownership-based
    deallocation frees every temporary at the end of its block, so a train
    step's peak memory is the sum of all its temporaries (the forward's
    activations, the backward's temporaries, the gradients) and the buffer
    pool cannot reuse a block within a step. This pass moves each
    `bufferization.dealloc` of one buffer without retained values, whose
    allocation is in the same block, up to right after the last op of the
    block that uses the buffer or may alias it (views; results of ops that
    read it and may refer to a buffer, such as a call's memref results or
    a region op's results when a nested terminator yields it; an op with
    regions uses what its nested ops use). The asynchronous collectives
    name their buffers on both the start and the wait, so a buffer in
    flight is freed after its wait. Deallocations it cannot place (a
    buffer used outside its block, a condition defined later) stay.
  }];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect"];
}

def MemoryPlan : Pass<"par-memory-plan", "ModuleOp"> {
  let summary = "Predicts each entry point's peak memory per device";
  let description = [{
    On the bufferized program, after `par-dealloc-after-last-use` and the
    lowering of deallocations: walks each public function's body in
    program order, adding every `memref.alloc` and subtracting every
    `memref.dealloc` (conditional ones as taken), a call holding its
    callee's peak on top of the caller's live buffers and handing over the
    fresh buffers it returns. The entry's peak per device is its arguments
    and results (the runner keeps both buffer sets; not the manifest's
    `donated` results, written into their arguments) plus the body's peak;
    what is live at the peak is split by kind: parameters, gradients,
    optimizer state, activations (what a grad function's forward still
    holds when it allocates the loss), temporaries, communication buffers
    (outputs of collectives), state (loss scale, error feedback) and data,
    the arguments' kinds read from the manifest. With `manifest` the plan
    is stored in each function's entry (`memory`), with the allocated
    types by size for the runtime's out-of-memory message; `report` prints
    it; `limit` (bytes, 0: none) warns when a plan exceeds it and names
    the options that would bring it under.
  }];
  let options = [
    Option<"manifest", "manifest", "std::string", /*default=*/"",
           "The manifest to read roles from and store the plans in">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Print each entry point's plan">,
    Option<"limit", "limit", "int64_t", /*default=*/"0",
           "Bytes per device to warn above (0: none)">,
  ];
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
    `par.mesh` ops, leaving a module that translates to LLVM IR, and makes
    par-outline-kernels' functions (`par.kernel`) internal and `no_inline`.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // PAR_CODEGEN_CPU_PASSES_TD

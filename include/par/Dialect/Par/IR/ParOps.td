//===- ParOps.td - par operations --------------------------*- tablegen -*-===//

#ifndef PAR_DIALECT_PAR_IR_PAROPS_TD
#define PAR_DIALECT_PAR_IR_PAROPS_TD

include "par/Dialect/Par/IR/ParDialect.td"
include "par/Dialect/Par/IR/ParAttrs.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Mesh
//===----------------------------------------------------------------------===//

def Par_MeshOp : Par_Op<"mesh", [Symbol]> {
  let summary = "A device mesh with named axes";
  let description = [{
    Declares a logical mesh of devices: an ordered list of named axes, each
    with a static size. The device count is the product of the sizes. A module
    may hold several meshes.

    ```mlir
    par.mesh @mesh ["dp"=2, "tp"=4]
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       StrArrayAttr:$axis_names,
                       DenseI64ArrayAttr:$axis_sizes);
  let assemblyFormat = [{
    $sym_name custom<MeshAxes>($axis_names, $axis_sizes) attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getNumAxes() { return getAxisSizes().size(); }
    /// Index of axis `name`, or -1.
    int64_t getAxisIndex(::llvm::StringRef name);
    /// Size of axis `name`, or -1 if there is no such axis.
    int64_t getAxisSize(::llvm::StringRef name);
    /// Number of devices: the product of all axis sizes.
    int64_t getNumDevices();
  }];
}

//===----------------------------------------------------------------------===//
// Annotations
//===----------------------------------------------------------------------===//

def Par_ShardingConstraintOp : Par_Op<"sharding_constraint", [
    Pure, AllTypesMatch<["input", "result"]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Fixes the sharding of a value inside a function";
  let description = [{
    Returns its operand unchanged and states that the value must have the
    given sharding. Sharding propagation treats it as an explicit annotation
    that always wins; partitioning replaces it by the collectives needed to
    reach that sharding.

    ```mlir
    %1 = par.sharding_constraint %0 <@mesh, [{}, {"tp"} ]> : tensor<8x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, Par_ShardingAttr:$sharding);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input $sharding attr-dict `:` type($input)";
}

def Par_ReshardOp : Par_Op<"reshard", [
    Pure, AllTypesMatch<["input", "result"]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Explicitly changes a value's sharding";
  let description = [{
    The operand keeps whatever sharding propagation gives it; the result has
    the given sharding. Partitioning decomposes the change into collectives
    (all_reduce, reduce_scatter, all_gather, all_to_all, all_slice) in as many
    steps as needed.

    ```mlir
    %1 = par.reshard %0 <@mesh, [{"dp"}, {} ]> : tensor<8x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, Par_ShardingAttr:$sharding);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input $sharding attr-dict `:` type($input)";
}

def Par_RecomputeBarrierOp : Par_Op<"recompute_barrier", [
    Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "A saved activation as the start of a recomputation";
  let description = [{
    Returns its operand unchanged. par-recompute passes each saved forward
    value a recomputation in the backward starts from through one, so that
    the recomputed ops have operands the forward's ops do not: CSE and
    canonicalization cannot fold the clones back into the forward (which
    would keep the values recomputation frees alive until the backward).
    It has no folder on purpose. Its sharding rule is the identity;
    one-shot bufferization makes its result the operand's buffer (an
    alias, no copy), so nothing of it reaches the lowering.

    ```mlir
    %x1 = par.recompute_barrier %x : tensor<8x16x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

//===----------------------------------------------------------------------===//
// Collectives (on per-device tensors)
//===----------------------------------------------------------------------===//

class Par_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Par_Op<mnemonic, !listconcat(traits, [
        DeclareOpInterfaceMethods<SymbolUserOpInterface>])> {
  code commonExtraClassDeclaration = [{
    /// Number of devices in each group: the product of the axes' sizes.
    int64_t getGroupSize();
  }];
  let extraClassDeclaration = commonExtraClassDeclaration;
  let hasVerifier = 1;
}

def Par_AllReduceOp : Par_CollectiveOp<"all_reduce",
    [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "Reduces a tensor over the devices of the given mesh axes";
  let description = [{
    Every device in a group (devices that differ only in their coordinates on
    `axes`) gets the elementwise reduction of the group's inputs.
    Ring cost: each device sends 2(n-1)/n of the tensor.

    ```mlir
    %1 = par.all_reduce %0 on @mesh axes = ["tp"] kind = sum : tensor<8x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, Par_ReductionKindAttr:$kind);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` $axes `kind` `=` `` $kind attr-dict `:` type($input)
  }];
}

def Par_BucketAllReduceOp : Par_CollectiveOp<"bucket_all_reduce", [
    Pure, RangedTypesMatchWith<"each result has the type of its input",
                               "inputs", "results", "$_self">]> {
  let summary = "All-reduces several tensors as one message (a bucket)";
  let description = [{
    The `par.all_reduce` of each input, over the same group, kind and
    element type, done as one collective: the runtime packs the members into
    one buffer and sends one message (PyTorch DDP's gradient buckets, XLA's
    all-reduce combiner). `par-bucket-reductions` makes it from the
    gradients' all-reduces; result i is input i reduced. Ring cost: 2(n-1)/n
    of the members' bytes together, in one message.

    ```mlir
    %r:2 = par.bucket_all_reduce %a, %b on @mesh axes = ["dp"] kind = sum : tensor<64x32xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes,
                       Par_ReductionKindAttr:$kind);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = [{
    $inputs `on` $mesh `axes` `=` $axes `kind` `=` `` $kind attr-dict `:` type($inputs)
  }];
}

def Par_AllGatherOp : Par_CollectiveOp<"all_gather", [Pure]> {
  let summary = "Concatenates the group's tensors along a dimension";
  let description = [{
    Concatenates the inputs of a group along `dim`, ordered by the devices'
    linear index over `axes` (last axis fastest). The result's `dim` is n
    times the input's. Ring cost: (n-1)/n of the result.

    ```mlir
    %1 = par.all_gather %0 on @mesh axes = ["tp"] dim = 1 : tensor<8x4xf32> -> tensor<8x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$dim);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` $axes `dim` `=` $dim attr-dict `:` type($input) `->` type($result)
  }];
}

def Par_ReduceScatterOp : Par_CollectiveOp<"reduce_scatter", [Pure]> {
  let summary = "Reduces over a group and leaves each device one block";
  let description = [{
    Reduces the group's inputs elementwise and splits the result along `dim`
    into n blocks; the device with linear index i over `axes` keeps block i.
    Ring cost: (n-1)/n of the input.

    ```mlir
    %1 = par.reduce_scatter %0 on @mesh axes = ["dp"] dim = 0 kind = sum : tensor<16x8xf32> -> tensor<8x8xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$dim,
                       Par_ReductionKindAttr:$kind);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` $axes `dim` `=` $dim `kind` `=` `` $kind attr-dict `:` type($input) `->` type($result)
  }];
}

def Par_AllToAllOp : Par_CollectiveOp<"all_to_all", [Pure]> {
  let summary = "Moves a split from one dimension to another";
  let description = [{
    Splits the input along `split_dim` into n blocks, sends block j to the
    group's device j and concatenates what it receives along `concat_dim`.
    Ring cost: (n-1)/n of the input.

    ```mlir
    %1 = par.all_to_all %0 on @mesh axes = ["tp"] split_dim = 1 concat_dim = 0 : tensor<2x8xf32> -> tensor<8x2xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$split_dim,
                       I64Attr:$concat_dim);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` $axes `split_dim` `=` $split_dim `concat_dim` `=` $concat_dim attr-dict `:` type($input) `->` type($result)
  }];
}

def Par_BroadcastOp : Par_CollectiveOp<"broadcast",
    [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "Copies the root's tensor to every device of its group";
  let description = [{
    `root` holds the root's coordinates on `axes`. Cost: the whole tensor.

    ```mlir
    %1 = par.broadcast %0 on @mesh axes = ["tp"] root = [0] : tensor<8xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, DenseI64ArrayAttr:$root);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` $axes `root` `=` $root attr-dict `:` type($input)
  }];
}

def Par_AllSliceOp : Par_CollectiveOp<"all_slice", [Pure]> {
  let summary = "Keeps this device's block of a replicated dimension";
  let description = [{
    The inverse of all_gather, with no communication: splits `dim` into n
    blocks and keeps block i, i being the device's linear index over `axes`.

    ```mlir
    %1 = par.all_slice %0 on @mesh axes = ["tp"] dim = 1 : tensor<8x16xf32> -> tensor<8x4xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$dim);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` $axes `dim` `=` $dim attr-dict `:` type($input) `->` type($result)
  }];
}

def Par_SendOp : Par_CollectiveOp<"send"> {
  let summary = "Sends a tensor to one device";
  let description = [{
    Sends to the device whose coordinates on `axes` are `dest` (its other
    coordinates equal the sender's). Matched in order with a `par.recv` with
    the same `tag`. Cost: the whole tensor.

    ```mlir
    par.send %0 on @mesh axes = ["pp"] dest = [1] : tensor<4x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, DenseI64ArrayAttr:$dest,
                       DefaultValuedAttr<I64Attr, "0">:$tag);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` $axes `dest` `=` $dest attr-dict `:` type($input)
  }];
}

def Par_RecvOp : Par_CollectiveOp<"recv"> {
  let summary = "Receives a tensor from one device";
  let description = [{
    Receives from the device whose coordinates on `axes` are `source`.

    ```mlir
    %0 = par.recv on @mesh axes = ["pp"] source = [0] : tensor<4x16xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes,
                       DenseI64ArrayAttr:$source,
                       DefaultValuedAttr<I64Attr, "0">:$tag);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    `on` $mesh `axes` `=` $axes `source` `=` $source attr-dict `:` type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Collectives on buffers (after bufferization)
//===----------------------------------------------------------------------===//

// The memref form of each collective: one-shot-bufferize turns a tensor
// collective into one of these (reading `input`, writing a fresh `output`),
// and Conversion/ParToRuntime turns these into calls to the runtime's kernel
// ABI. Bufferization thus only bufferizes, and a second target (CUDA) lowers
// the same ops its own way. Buffers have static shapes and the identity
// layout (contiguous), as the runtime's pointer-based kernels need.
class Par_BufferOp<string mnemonic, list<Trait> traits = []>
    : Par_Op<"buffer_" # mnemonic, !listconcat(traits, [
        DeclareOpInterfaceMethods<SymbolUserOpInterface>])> {
  let hasVerifier = 1;
}

def Par_BufferAllReduceOp : Par_BufferOp<"all_reduce"> {
  let summary = "par.all_reduce on buffers";
  let description = [{
    ```mlir
    par.buffer_all_reduce %in, %out on @mesh axes = ["tp"] kind = sum : memref<8x16xf32>, memref<8x16xf32>
    ```
  }];
  let arguments = (ins Arg<AnyStaticShapeMemRef, "", [MemRead]>:$input,
                       Arg<AnyStaticShapeMemRef, "", [MemWrite]>:$output,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes,
                       Par_ReductionKindAttr:$kind);
  let assemblyFormat = [{
    $input `,` $output `on` $mesh `axes` `=` $axes `kind` `=` `` $kind attr-dict `:` type($input) `,` type($output)
  }];
}

def Par_BufferBucketAllReduceOp : Par_BufferOp<"bucket_all_reduce",
    [AttrSizedOperandSegments]> {
  let summary = "par.bucket_all_reduce on buffers (blocking)";
  let description = [{
    Output i receives the reduction of input i over the group; all members
    travel in one message. `par-async-collectives` splits it into
    `par.buffer_all_reduce_start` and `par.buffer_wait`.

    ```mlir
    par.buffer_bucket_all_reduce ins(%a, %b : memref<64x32xf32>, memref<64xf32>) outs(%ra, %rb : memref<64x32xf32>, memref<64xf32>) on @mesh axes = ["dp"] kind = sum
    ```
  }];
  let arguments = (ins Arg<Variadic<AnyStaticShapeMemRef>, "", [MemRead]>:$inputs,
                       Arg<Variadic<AnyStaticShapeMemRef>, "", [MemWrite]>:$outputs,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes,
                       Par_ReductionKindAttr:$kind);
  let assemblyFormat = [{
    `ins` `(` $inputs `:` type($inputs) `)` `outs` `(` $outputs `:` type($outputs) `)`
    `on` $mesh `axes` `=` $axes `kind` `=` `` $kind attr-dict
  }];
}

// Asynchronous all-reduce: the start hands the members to the runtime and
// returns a request handle (an i64, the runtime's own handle, so that the
// lowering is a plain call); the wait completes it. Between the two the
// inputs may be read but not written, and the outputs are neither read nor
// written (par-async-collectives places the wait accordingly). Both ops
// name the buffers, so that their memory effects keep every other access to
// them, and the deallocations, outside the window.
def Par_BufferAllReduceStartOp : Par_BufferOp<"all_reduce_start",
    [AttrSizedOperandSegments]> {
  let summary = "Starts an all-reduce of one or more buffers as one message";
  let description = [{
    Starts what `par.buffer_bucket_all_reduce` does (one member: what
    `par.buffer_all_reduce` does) and returns its request handle, which
    exactly one `par.buffer_wait` with the same buffers completes later in
    the same block.

    ```mlir
    %h = par.buffer_all_reduce_start ins(%a, %b : memref<64x32xf32>, memref<64xf32>) outs(%ra, %rb : memref<64x32xf32>, memref<64xf32>) on @mesh axes = ["dp"] kind = sum
    ... compute that touches neither %ra, %rb nor writes %a, %b ...
    par.buffer_wait %h ins(%a, %b : memref<64x32xf32>, memref<64xf32>) outs(%ra, %rb : memref<64x32xf32>, memref<64xf32>)
    ```
  }];
  let arguments = (ins Arg<Variadic<AnyStaticShapeMemRef>, "", [MemRead]>:$inputs,
                       Arg<Variadic<AnyStaticShapeMemRef>, "", [MemWrite]>:$outputs,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes,
                       Par_ReductionKindAttr:$kind);
  let results = (outs I64:$request);
  let assemblyFormat = [{
    `ins` `(` $inputs `:` type($inputs) `)` `outs` `(` $outputs `:` type($outputs) `)`
    `on` $mesh `axes` `=` $axes `kind` `=` `` $kind attr-dict
  }];
}

// Asynchronous all-gather: par-zero-prefetch starts ZeRO-3's parameter
// gathers ahead of their use. The same contract as the all-reduce start
// (the input read-only, the output untouched until the wait).
def Par_BufferAllGatherStartOp : Par_BufferOp<"all_gather_start"> {
  let summary = "Starts an all-gather of one buffer";
  let description = [{
    Starts what `par.buffer_all_gather` does and returns its request
    handle, which exactly one `par.buffer_wait` with the same buffers
    completes later in the same block. Until then the input may be read but
    not written, and the output is neither read nor written.

    ```mlir
    %h = par.buffer_all_gather_start %w, %g on @mesh axes = ["dp"] dim = 0 : memref<16x32xf32>, memref<32x32xf32>
    ... compute that touches neither %g nor writes %w ...
    par.buffer_wait %h ins(%w : memref<16x32xf32>) outs(%g : memref<32x32xf32>)
    ```
  }];
  let arguments = (ins Arg<AnyStaticShapeMemRef, "", [MemRead]>:$input,
                       Arg<AnyStaticShapeMemRef, "", [MemWrite]>:$output,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes,
                       I64Attr:$dim);
  let results = (outs I64:$request);
  let assemblyFormat = [{
    $input `,` $output `on` $mesh `axes` `=` $axes `dim` `=` $dim attr-dict `:` type($input) `,` type($output)
  }];
}

def Par_BufferWaitOp : Par_Op<"buffer_wait", [AttrSizedOperandSegments]> {
  let summary = "Completes a started all-reduce or all-gather";
  let description = [{
    Waits for the request of the `par.buffer_all_reduce_start` or
    `par.buffer_all_gather_start` that defines `request` (in the same
    block, with the same buffers); afterwards the outputs hold the results
    and the inputs may be written again.

    ```mlir
    par.buffer_wait %h ins(%a : memref<64xf32>) outs(%ra : memref<64xf32>)
    ```
  }];
  let arguments = (ins I64:$request,
                       Arg<Variadic<AnyStaticShapeMemRef>, "", [MemRead]>:$inputs,
                       Arg<Variadic<AnyStaticShapeMemRef>, "", [MemWrite]>:$outputs);
  let assemblyFormat = [{
    $request `ins` `(` $inputs `:` type($inputs) `)` `outs` `(` $outputs `:` type($outputs) `)` attr-dict
  }];
  let hasVerifier = 1;
}

def Par_BufferAllGatherOp : Par_BufferOp<"all_gather"> {
  let summary = "par.all_gather on buffers";
  let arguments = (ins Arg<AnyStaticShapeMemRef, "", [MemRead]>:$input,
                       Arg<AnyStaticShapeMemRef, "", [MemWrite]>:$output,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes,
                       I64Attr:$dim);
  let assemblyFormat = [{
    $input `,` $output `on` $mesh `axes` `=` $axes `dim` `=` $dim attr-dict `:` type($input) `,` type($output)
  }];
}

def Par_BufferReduceScatterOp : Par_BufferOp<"reduce_scatter"> {
  let summary = "par.reduce_scatter on buffers";
  let arguments = (ins Arg<AnyStaticShapeMemRef, "", [MemRead]>:$input,
                       Arg<AnyStaticShapeMemRef, "", [MemWrite]>:$output,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes,
                       I64Attr:$dim, Par_ReductionKindAttr:$kind);
  let assemblyFormat = [{
    $input `,` $output `on` $mesh `axes` `=` $axes `dim` `=` $dim `kind` `=` `` $kind attr-dict `:` type($input) `,` type($output)
  }];
}

def Par_BufferAllToAllOp : Par_BufferOp<"all_to_all"> {
  let summary = "par.all_to_all on buffers";
  let arguments = (ins Arg<AnyStaticShapeMemRef, "", [MemRead]>:$input,
                       Arg<AnyStaticShapeMemRef, "", [MemWrite]>:$output,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes,
                       I64Attr:$split_dim, I64Attr:$concat_dim);
  let assemblyFormat = [{
    $input `,` $output `on` $mesh `axes` `=` $axes `split_dim` `=` $split_dim `concat_dim` `=` $concat_dim attr-dict `:` type($input) `,` type($output)
  }];
}

def Par_BufferBroadcastOp : Par_BufferOp<"broadcast"> {
  let summary = "par.broadcast on buffers";
  let arguments = (ins Arg<AnyStaticShapeMemRef, "", [MemRead]>:$input,
                       Arg<AnyStaticShapeMemRef, "", [MemWrite]>:$output,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes,
                       DenseI64ArrayAttr:$root);
  let assemblyFormat = [{
    $input `,` $output `on` $mesh `axes` `=` $axes `root` `=` $root attr-dict `:` type($input) `,` type($output)
  }];
}

def Par_BufferAllSliceOp : Par_BufferOp<"all_slice"> {
  let summary = "par.all_slice on buffers";
  let arguments = (ins Arg<AnyStaticShapeMemRef, "", [MemRead]>:$input,
                       Arg<AnyStaticShapeMemRef, "", [MemWrite]>:$output,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes,
                       I64Attr:$dim);
  let assemblyFormat = [{
    $input `,` $output `on` $mesh `axes` `=` $axes `dim` `=` $dim attr-dict `:` type($input) `,` type($output)
  }];
}

// The message leaves the device: an effect beyond reading the buffer, so
// that a send is never dead code.
def Par_BufferSendOp : Par_BufferOp<"send", [MemoryEffects<[MemWrite]>]> {
  let summary = "par.send from a buffer";
  let arguments = (ins Arg<AnyStaticShapeMemRef, "", [MemRead]>:$input,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes,
                       DenseI64ArrayAttr:$dest,
                       DefaultValuedAttr<I64Attr, "0">:$tag);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` $axes `dest` `=` $dest attr-dict `:` type($input)
  }];
}

def Par_BufferRecvOp : Par_BufferOp<"recv"> {
  let summary = "par.recv into a buffer";
  let arguments = (ins Arg<AnyStaticShapeMemRef, "", [MemWrite]>:$output,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes,
                       DenseI64ArrayAttr:$source,
                       DefaultValuedAttr<I64Attr, "0">:$tag);
  let assemblyFormat = [{
    $output `on` $mesh `axes` `=` $axes `source` `=` $source attr-dict `:` type($output)
  }];
}

//===----------------------------------------------------------------------===//
// Loss scaling (mixed precision)
//===----------------------------------------------------------------------===//

// A scalar f32 tensor (a flag, a scale), buildable so formats can omit it.
def Par_ScalarF32 : 0DTensorOf<[F32]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getF32Type())">;

def Par_ScaleLossOp : Par_Op<"scale_loss",
    [Pure, AllTypesMatch<["loss", "result"]>]> {
  let summary = "The loss, with its backward seeded by the loss scale";
  let description = [{
    Returns `loss` unchanged; its adjoint is `scale * dy`, so par-autodiff's
    backward of a function returning it starts at `scale` instead of 1 and
    every gradient comes out multiplied by the scale (small 16-bit gradients
    stay above the underflow threshold). The reported loss is the true one.
    par-loss-scale wraps a forward's loss in it; after par-autodiff the op
    is only a forwarding of `loss` (par-decompose-aggregated-ops removes it).

    ```mlir
    %l = par.scale_loss %loss by %scale : tensor<f32>
    ```
  }];
  let arguments = (ins 0DTensorOf<[AnyFloat]>:$loss, Par_ScalarF32:$scale);
  let results = (outs 0DTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = "$loss `by` $scale attr-dict `:` type($loss)";
}

def Par_AllFiniteOp : Par_Op<"all_finite",
    [Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "1 if every element of every input, on every device, is finite";
  let description = [{
    A scalar f32: 1.0 when no element of any input is Inf or NaN, else 0.0.
    With a mesh the decision covers every device of the mesh, all axes
    (data, tensor and pipeline parallel) included, so that every rank takes
    the same step-or-skip decision: par-partition makes it the local check
    followed by a `min` all_reduce over every mesh axis. Without a mesh it
    is the check of this device's values. With no inputs (a pipeline stage
    without parameters) it is 1 here, and still takes part in the mesh-wide
    decision.

    ```mlir
    %ok = par.all_finite %g0, %g1 over @mesh : tensor<16x32xf32>, tensor<32xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs,
                       OptionalAttr<FlatSymbolRefAttr>:$mesh);
  let results = (outs Par_ScalarF32:$result);
  let assemblyFormat = [{
    $inputs (`over` $mesh^)? attr-dict `:` type($inputs)
  }];
  let hasVerifier = 1;
}

def Par_UpdateLossScaleOp : Par_Op<"update_loss_scale", [Pure]> {
  let summary = "The next loss-scale state after a step";
  let description = [{
    The scale state is program state (arguments and results of the train
    step, like the optimizer's): the `scale`, `good` (consecutive finite
    steps since the last change) and `hysteresis` (non-finite steps still
    tolerated before a back-off), as Megatron's DynamicGradScaler. With
    `finite` = 1: `good + 1`, and when it reaches the policy's interval the
    scale grows (up to the largest f32), `good` resets to 0 and `hysteresis`
    to the policy's. With `finite` = 0: `good` = 0, `hysteresis - 1`, and
    while that is <= 0 every such step backs the scale off (not below
    `min`). With hysteresis 1 this is PyTorch's GradScaler. A static policy
    returns its inputs.

    ```mlir
    %s2, %g2, %h2 = par.update_loss_scale %s, %g, %h finite %ok
        policy #par.loss_scale<kind = dynamic, init = 65536.0, growth = 2.0,
                               backoff = 0.5, interval = 2000, hysteresis = 1,
                               min = 1.0>
    ```
  }];
  let arguments = (ins Par_ScalarF32:$scale, Par_ScalarF32:$good,
                       Par_ScalarF32:$hysteresis, Par_ScalarF32:$finite,
                       Par_LossScaleAttr:$policy);
  let results = (outs Par_ScalarF32:$new_scale, Par_ScalarF32:$new_good,
                      Par_ScalarF32:$new_hysteresis);
  let assemblyFormat = [{
    $scale `,` $good `,` $hysteresis `finite` $finite `policy` $policy attr-dict
  }];
}

#endif // PAR_DIALECT_PAR_IR_PAROPS_TD

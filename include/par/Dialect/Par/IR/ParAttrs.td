//===- ParAttrs.td - par attributes and enums --------------*- tablegen -*-===//

#ifndef PAR_DIALECT_PAR_IR_PARATTRS_TD
#define PAR_DIALECT_PAR_IR_PARATTRS_TD

include "par/Dialect/Par/IR/ParDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

def Par_ReductionKind : I32EnumAttr<"ReductionKind", "reduction kind", [
    I32EnumAttrCase<"Sum", 0, "sum">,
    I32EnumAttrCase<"Max", 1, "max">,
    I32EnumAttrCase<"Min", 2, "min">,
    I32EnumAttrCase<"Avg", 3, "avg">
  ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::par";
}

def Par_ReductionKindAttr
    : EnumAttr<Par_Dialect, Par_ReductionKind, "reduction">;

def Par_ShardingAttr : AttrDef<Par_Dialect, "Sharding"> {
  let mnemonic = "sharding";
  let summary = "How a tensor is laid out over a mesh";
  let description = [{
    For each tensor dimension, the ordered list of mesh axes the dimension is
    split over (major to minor: the block a device holds is the linear index
    of its coordinates on those axes, the last axis varying fastest). The
    optional `partial` clause lists axes over which the local values are
    partial results that still need a reduction of the given kind (sum, max
    or min). Every other axis replicates the tensor.

    ```mlir
    #par.sharding<@mesh, [{"dp"}, {} ]>                   // batch over dp
    #par.sharding<@mesh, [{}, {"tp", "sp"} ]>             // dim 1 over tp*sp
    #par.sharding<@mesh, [{}, {} ], partial sum {"tp"}>   // unreduced over tp
    ```

    An axis may appear once at most. Whether axes exist and divide the
    tensor is checked where the sharding meets a mesh and a type.
  }];
  let parameters = (ins
    "::mlir::FlatSymbolRefAttr":$mesh,
    ArrayRefParameter<"::mlir::ArrayAttr", "split axes per dimension">:$dims,
    "::mlir::ArrayAttr":$partialAxes,
    "::mlir::par::ReductionKind":$partialKind
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    int64_t getRank() const { return getDims().size(); }
    /// Axes dimension `dim` is split over, major to minor.
    ::llvm::SmallVector<::llvm::StringRef> getDimAxes(int64_t dim) const;
    ::llvm::SmallVector<::llvm::StringRef> getPartialAxisNames() const;
    bool isPartial() const { return !getPartialAxes().empty(); }
    /// True if no dimension is split and nothing is partial.
    bool isFullyReplicated() const;
    /// Builds a sharding from plain axis-name lists.
    static ShardingAttr get(::mlir::MLIRContext *ctx,
        ::mlir::FlatSymbolRefAttr mesh,
        ::llvm::ArrayRef<::llvm::SmallVector<::llvm::StringRef>> dims,
        ::llvm::ArrayRef<::llvm::StringRef> partial = {},
        ReductionKind kind = ReductionKind::Sum);
    /// Fully replicated sharding of the given rank.
    static ShardingAttr getReplicated(::mlir::MLIRContext *ctx,
        ::mlir::FlatSymbolRefAttr mesh, int64_t rank);
    /// The same sharding without partial axes.
    ShardingAttr withoutPartial() const;
  }];
}

def Par_InitKind : I32EnumAttr<"InitKind", "initialiser kind", [
    I32EnumAttrCase<"Zeros", 0, "zeros">,
    I32EnumAttrCase<"Ones", 1, "ones">,
    I32EnumAttrCase<"Uniform", 2, "uniform">,
    I32EnumAttrCase<"Fill", 3, "fill">
  ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::par";
}

// The scale of a uniform initialiser: a float literal, 0 (absent) otherwise.
def Par_InitScaleParameter
    : AttrOrTypeParameter<"::llvm::APFloat", "uniform initialiser scale"> {
  let comparator = "$_lhs.bitwiseIsEqual($_rhs)";
  let parser = [{ [&]() -> ::mlir::FailureOr<::llvm::APFloat> {
    double scale;
    if ($_parser.parseFloat(scale))
      return ::mlir::failure();
    return ::llvm::APFloat(scale);
  }() }];
  let printer = "$_printer.printFloat($_self)";
  let defaultValue = "::llvm::APFloat(0.0)";
}

def Par_InitAttr : AttrDef<Par_Dialect, "Init"> {
  let mnemonic = "init";
  let summary = "How a driver initialises a function argument";
  let description = [{
    On a function argument (`par.init`): the value a driver (par-run, the
    session's tooling) gives the argument when the user passes none. `zeros`
    and `ones` fill it, `fill` fills it with the given value (a loss
    scale's initial value); `uniform` draws from [-scale, scale) with the
    counter-based generator, so the value does not depend on the number of
    ranks. The optimizer's state starts at `zeros`, AdamW's step at `ones`.

    ```mlir
    %w: tensor<16x64xf32> {par.param, par.init = #par.init<uniform, 0.02>}
    %g: tensor<64xf32> {par.param, par.init = #par.init<ones>}
    ```

    The manifest spells it as par/Manifest/Schema.h's `"zeros"`, `"ones"`,
    `"uniform:<scale>"` or `"fill:<value>"`.
  }];
  let parameters = (ins EnumParameter<Par_InitKind>:$kind,
                        Par_InitScaleParameter:$scale);
  let assemblyFormat = "`<` $kind (`,` $scale^)? `>`";
  let genVerifyDecl = 1;
  let builders = [
    AttrBuilder<(ins "InitKind":$kind, CArg<"double", "0.0">:$scale), [{
      return $_get($_ctxt, kind, ::llvm::APFloat(scale));
    }]>
  ];
  let extraClassDeclaration = [{
    /// The uniform initialiser's scale as a double (0 for zeros and ones).
    double getScaleValue() const { return getScale().convertToDouble(); }
  }];
}

// A float parameter (stored as an APFloat: hashable, printed exactly).
def Par_FloatParameter : AttrOrTypeParameter<"::llvm::APFloat", "a float"> {
  let comparator = "$_lhs.bitwiseIsEqual($_rhs)";
  let parser = [{ [&]() -> ::mlir::FailureOr<::llvm::APFloat> {
    double v;
    if ($_parser.parseFloat(v))
      return ::mlir::failure();
    return ::llvm::APFloat(v);
  }() }];
  let printer = "$_printer.printFloat($_self)";
}

def Par_LossScaleKind : I32EnumAttr<"LossScaleKind", "loss scaling policy", [
    I32EnumAttrCase<"Static", 0, "static">,
    I32EnumAttrCase<"Dynamic", 1, "dynamic">
  ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::par";
}

def Par_LossScaleAttr : AttrDef<Par_Dialect, "LossScale"> {
  let mnemonic = "loss_scale";
  let summary = "A loss-scaling policy";
  let description = [{
    How the loss scale of a mixed-precision train step evolves (see
    docs/RationaleMixedPrecision.md). `static`: the scale stays `init`.
    `dynamic` (PyTorch's GradScaler, Megatron's DynamicGradScaler): after
    `interval` consecutive steps with finite gradients the scale is
    multiplied by `growth`; a step with a non-finite gradient is skipped
    and, once `hysteresis` such steps have been seen since the last growth,
    the scale is multiplied by `backoff` (at every such step), never below
    `min` (par.update_loss_scale has the exact rule).

    ```mlir
    #par.loss_scale<kind = dynamic, init = 65536.0, growth = 2.0, backoff = 0.5,
                    interval = 2000, hysteresis = 1, min = 1.0>
    ```
  }];
  let parameters = (ins EnumParameter<Par_LossScaleKind>:$kind,
                        Par_FloatParameter:$init, Par_FloatParameter:$growth,
                        Par_FloatParameter:$backoff, "int64_t":$interval,
                        "int64_t":$hysteresis, Par_FloatParameter:$min);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let builders = [
    AttrBuilder<(ins "LossScaleKind":$kind, "double":$init, "double":$growth,
                     "double":$backoff, "int64_t":$interval,
                     "int64_t":$hysteresis, "double":$min), [{
      return $_get($_ctxt, kind, ::llvm::APFloat(init), ::llvm::APFloat(growth),
                   ::llvm::APFloat(backoff), interval, hysteresis,
                   ::llvm::APFloat(min));
    }]>
  ];
  let extraClassDeclaration = [{
    double getInitValue() const { return getInit().convertToDouble(); }
    double getGrowthValue() const { return getGrowth().convertToDouble(); }
    double getBackoffValue() const { return getBackoff().convertToDouble(); }
    double getMinValue() const { return getMin().convertToDouble(); }
    bool isDynamic() const { return getKind() == LossScaleKind::Dynamic; }
  }];
}

//===----------------------------------------------------------------------===//
// Typed contracts between the passes, and with the driver
//===----------------------------------------------------------------------===//

// A list of attributes of one kind, spelled `[a, b, ...]` (each in its full
// `#par.<mnemonic><...>` form).
class Par_AttrListParameter<string attr, string desc>
    : ArrayRefParameter<attr, desc> {
  let parser = "::mlir::par::parseAttrList<" # attr # ">($_parser)";
  let printer = "::mlir::par::printAttrList($_printer, $_self)";
}
class Par_OptionalAttrListParameter<string attr, string desc>
    : OptionalArrayRefParameter<attr, desc> {
  let parser = "::mlir::par::parseAttrList<" # attr # ">($_parser)";
  let printer = "::mlir::par::printAttrList($_printer, $_self)";
}

def Par_StageAttr : AttrDef<Par_Dialect, "Stage"> {
  let mnemonic = "stage";
  let summary = "One pipeline stage's functions, by symbol";
  let description = [{
    An entry of `#par.pipeline`'s stage table: the functions of one pipeline
    stage, by reference, so that no pass and no driver finds a function by
    its name. par-pipeline-split records the functions it makes:

    - `forward`: the stage's forward (`(args..., [x]) -> y`; the last
      stage's returns the loss);
    - `loss`: the scalar whose gradient is the stage's backward (the loss
      for the last stage, `sum(y * dy)` otherwise);
    - `input_loss`, `weight_loss` (with `split-backward`): the same scalar
      with only the input, or only the parameters, differentiated.

    par-pipeline-schedule completes the entry with what par-autodiff and
    par-optimizer made from them (their `par.grad` and `par.update`):

    - `backward`: the gradient of `loss` (the full backward, B);
    - `input_grad`, `weight_grad`: the gradients of `input_loss` and
      `weight_loss` (ZB-H1's BI and BW; stage 0 has no `input_grad`);
    - `update`: the stage's optimizer update.

    par-pipeline-stash (on the sharded program) splits `backward` into the
    forward that keeps what it needs and the rest:

    - `stash_forward`: `(args..., [x]) -> (y, residuals...)`, the F action
      (the last stage's returns the loss first);
    - `stash_backward`: `(args..., [x], residuals..., [dy]) -> (0, grads...,
      [dx])`, the B action, without the forward it would recompute;
    - with ZB-H1's halves, `stash_input_grad` (stages > 0): the backward's
      arguments -> `(0, dx, saved...)`, the BI action, and
      `stash_weight_grad`: `(args..., [x], residuals..., saved..., [dy]) ->
      (0, grads...)`, the BW action on what BI saved (stage 0's is
      `stash_backward`).

    ```mlir
    #par.stage<forward = @loss_s0_fwd, loss = @loss_s0,
               backward = @loss_s0_grad, update = @loss_s0_update>
    ```

    Whether the symbols name functions is checked where the attribute
    meets a module (`par.pipeline` on a module).
  }];
  let parameters = (ins
    "::mlir::FlatSymbolRefAttr":$forward,
    "::mlir::FlatSymbolRefAttr":$loss,
    OptionalParameter<"::mlir::FlatSymbolRefAttr">:$input_loss,
    OptionalParameter<"::mlir::FlatSymbolRefAttr">:$weight_loss,
    OptionalParameter<"::mlir::FlatSymbolRefAttr">:$backward,
    OptionalParameter<"::mlir::FlatSymbolRefAttr">:$input_grad,
    OptionalParameter<"::mlir::FlatSymbolRefAttr">:$weight_grad,
    OptionalParameter<"::mlir::FlatSymbolRefAttr">:$update,
    OptionalParameter<"::mlir::FlatSymbolRefAttr">:$stash_forward,
    OptionalParameter<"::mlir::FlatSymbolRefAttr">:$stash_backward,
    OptionalParameter<"::mlir::FlatSymbolRefAttr">:$stash_input_grad,
    OptionalParameter<"::mlir::FlatSymbolRefAttr">:$stash_weight_grad
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let extraClassDeclaration = [{
    /// Every symbol the entry names, with its role ("forward", ...).
    ::llvm::SmallVector<std::pair<::llvm::StringRef, ::mlir::FlatSymbolRefAttr>>
    getSymbols() const;
  }];
}

// A rank's pipeline actions, `[a, b, ...]`; see lib/Pipelining/Schedule
// (`::par::pipeline::Action`).
def Par_PipelineActionParameter
    : ArrayRefParameter<"::par::pipeline::Action", "pipeline actions"> {
  let parser = "::mlir::par::parseActions($_parser)";
  let printer = "::mlir::par::printActions($_printer, $_self)";
}

def Par_ProgramAttr : AttrDef<Par_Dialect, "Program"> {
  let mnemonic = "program";
  let summary = "One pipeline rank's ordered actions";
  let description = [{
    What one rank of the pipeline axis runs in one train step, in order:
    `fwd`, `bwd` (the full backward), `bi` and `bw` (its input and weight
    halves) of a (micro-batch `mb`, stage `s`), and the blocking transfers
    `send_act`/`recv_act` (stage `s`'s input activation) and
    `send_grad`/`recv_grad` (its gradient) with the other rank (`to` or
    `from`). lib/Pipelining/Schedule's `Action`, typed.

    ```mlir
    #par.program<[fwd(mb=0, s=0), send_act(mb=0, s=1, to=1),
                  recv_grad(mb=0, s=1, from=1), bwd(mb=0, s=0)]>
    ```

    Micro-batches and stages are non-negative, a transfer's stage is >= 1
    and names its peer; whether the programs of all ranks fit together is
    `#par.pipeline`'s verifier.
  }];
  let parameters = (ins Par_PipelineActionParameter:$actions);
  let assemblyFormat = "`<` $actions `>`";
  let genVerifyDecl = 1;
}

def Par_PipelineAttr : AttrDef<Par_Dialect, "Pipeline"> {
  let mnemonic = "pipeline";
  let summary = "A pipelined program: its stage table and per-rank programs";
  let description = [{
    On the module (`par.pipeline`): what par-pipeline-split made of the
    function `func` (the stage table, one `#par.stage` per stage, stage s
    on pipeline rank s mod p) and, once par-pipeline-schedule ran, the
    schedule: its name, the mesh axis the stages are placed on, the
    micro-batch count, the train step (`step`, the unpipelined reference of
    the same computation, when par-optimizer made one) and the function
    computing logits (`logits`, when `func` names one with `par.logits`),
    and one `#par.program` per rank of that axis.

    ```mlir
    #par.pipeline<func = @loss, stages = [#par.stage<...>, #par.stage<...>],
                  step = @loss_step, schedule = "1f1b", axis = "pp",
                  micro_batches = 4,
                  programs = [#par.program<[...]>, #par.program<[...]>]>
    ```

    The verifier is the deadlock proof: with p programs and S stages
    (S = p x v), it simulates the programs under blocking send/recv
    (lib/Pipelining/Schedule's verifier, as par-verify-pipeline runs it): every
    forward and backward of every (micro-batch, stage) present once on the
    stage's rank, every send meeting the matching receive, in order, and no
    rank waiting forever. `zbh1` and `zbv` run the split backward (`bi`,
    `bw`): each stage then needs `weight_loss` (and, but for stage 0,
    `input_loss`). `zbv` places stage s of chunk s / p on rank s mod p when
    the chunk is even and p - 1 - s mod p when it is odd (a V: rank r holds
    stages r and 2p-1-r); the other schedules on rank s mod p.
  }];
  let parameters = (ins
    "::mlir::FlatSymbolRefAttr":$func,
    Par_AttrListParameter<"::mlir::par::StageAttr", "stage table">:$stages,
    OptionalParameter<"::mlir::FlatSymbolRefAttr">:$step,
    OptionalParameter<"::mlir::FlatSymbolRefAttr">:$logits,
    OptionalParameter<"::mlir::StringAttr">:$schedule,
    OptionalParameter<"::mlir::StringAttr">:$axis,
    OptionalParameter<"int64_t">:$micro_batches,
    Par_OptionalAttrListParameter<"::mlir::par::ProgramAttr",
                                  "per-rank programs">:$programs
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Whether par-pipeline-schedule stored programs.
    bool isScheduled() const { return !getPrograms().empty(); }
    /// The shape of the stored programs: p ranks, m micro-batches, v stages
    /// per rank, the backward split for zbh1 and zbv, the V placement for
    /// zbv.
    ::par::pipeline::PipelineShape getShape() const;
    /// The stored programs in lib/Pipelining/Schedule's form (index = rank).
    ::par::pipeline::Programs getSchedulePrograms() const;
    /// The same attribute with the schedule's fields set.
    PipelineAttr withSchedule(::mlir::FlatSymbolRefAttr step,
        ::mlir::FlatSymbolRefAttr logits, ::llvm::StringRef schedule,
        ::llvm::StringRef axis, int64_t microBatches,
        const ::par::pipeline::Programs &programs) const;
    /// The same attribute with another stage table.
    PipelineAttr withStages(::llvm::ArrayRef<StageAttr> stages) const;
  }];
}

#endif // PAR_DIALECT_PAR_IR_PARATTRS_TD

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

    The manifest spells it as ManifestSchema.h's `"zeros"`, `"ones"`,
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

#endif // PAR_DIALECT_PAR_IR_PARATTRS_TD

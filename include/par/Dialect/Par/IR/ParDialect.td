//===- ParDialect.td - par dialect definition --------------*- tablegen -*-===//
//
// The `par` dialect describes how tensors are laid out over a device mesh and
// the collectives that move data between devices.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_DIALECT_PAR_IR_PARDIALECT_TD
#define PAR_DIALECT_PAR_IR_PARDIALECT_TD

include "mlir/IR/OpBase.td"

def Par_Dialect : Dialect {
  let name = "par";
  let cppNamespace = "::mlir::par";
  let summary = "Mesh shardings and collectives for SPMD programs.";
  let description = [{
    The `par` dialect is modelled on Shardy's axis-based design. A `par.mesh`
    names the axes of a device mesh. A `#par.sharding` attribute says, for each
    dimension of a tensor, the ordered list of mesh axes it is split over, and
    on which axes the value is still a *partial* result that needs a reduction.
    Axes that appear nowhere in a sharding replicate the tensor.

    Annotations (`par.sharding` on function arguments and results,
    `par.sharding_constraint`, `par.reshard`) feed sharding propagation; after
    partitioning, programs hold per-device tensors and explicit collectives
    (`par.all_reduce`, `par.all_gather`, `par.reduce_scatter`,
    `par.all_to_all`, `par.broadcast`, `par.send`/`par.recv`) plus the local
    `par.all_slice`.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Registers the attributes (ParAttrs.cpp, where their storage is).
    void registerAttributes();

    /// Name of the discardable attribute holding a value's sharding on
    /// function arguments, results and ops.
    static constexpr ::llvm::StringLiteral kShardingAttrName = "par.sharding";
    /// Name of the attribute partitioning leaves on function arguments and
    /// results: the global (unsharded) type of the value.
    static constexpr ::llvm::StringLiteral kGlobalTypeAttrName =
        "par.global_type";
    /// Marks a function argument as a trainable parameter (par-autodiff).
    static constexpr ::llvm::StringLiteral kParamAttrName = "par.param";
    /// How a driver initialises an argument: a #par.init attribute
    /// (zeros, ones, or uniform in [-scale, scale) from the counter-based
    /// generator).
    static constexpr ::llvm::StringLiteral kInitAttrName = "par.init";
    /// On a train step: (result, argument) index pairs; after one step the
    /// result is the argument's value for the next (parameters, state).
    static constexpr ::llvm::StringLiteral kFeedbackAttrName = "par.feedback";
    /// On a train step or a pipeline stage's update: (result, argument)
    /// index pairs whose result the program writes into the argument's
    /// buffer (par-donate-buffers; the runner passes that buffer for both).
    static constexpr ::llvm::StringLiteral kDonatedAttrName = "par.donated";
    /// Between par-return-donated's two runs: the donated (result,
    /// argument) pairs the function does not return for now.
    static constexpr ::llvm::StringLiteral kDonatedDroppedAttrName =
        "par.donated_dropped";
    /// On a train step that accumulates gradients: the number of
    /// micro-batches each data argument is split into (a positive i64).
    static constexpr ::llvm::StringLiteral kMicroBatchesAttrName =
        "par.micro_batches";
    /// On a function par-mixed-precision converted: its compute type (a
    /// TypeAttr, f16 or bf16).
    static constexpr ::llvm::StringLiteral kMixedPrecisionAttrName =
        "par.mixed_precision";
    /// On a function par-outline-kernels made: it holds one kernel (a unit
    /// attribute).
    static constexpr ::llvm::StringLiteral kKernelAttrName = "par.kernel";
    /// On a par.sharding_constraint par-optimizer's zero=3 made, and on the
    /// collectives partitioning makes from it: "forward" or "backward", the
    /// phase of the parameter's uses it gathers for. Two gathers of one
    /// parameter then differ, so that CSE does not keep the forward's copy
    /// alive into the backward.
    static constexpr ::llvm::StringLiteral kZeROGatherAttrName =
        "par.zero_gather";
    /// On a par.reshard par-sequence-parallel made for a gradient
    /// function's backward, and on the all_gather partitioning makes from
    /// it: "backward". The backward gathers the split activation again
    /// instead of reading the forward's gathered copy (CSE keeps the two).
    static constexpr ::llvm::StringLiteral kSPGatherAttrName =
        "par.sp_gather";
    /// On an op, for par-mixed-precision: "f32" keeps it in f32, "compute"
    /// runs it in the compute type, whatever its kind.
    static constexpr ::llvm::StringLiteral kPrecisionAttrName =
        "par.precision";
    /// On a function argument: the loss scale (a #par.loss_scale policy),
    /// added by par-loss-scale and carried by the train step.
    static constexpr ::llvm::StringLiteral kLossScaleAttrName =
        "par.loss_scale";
    /// On a train step with loss scaling: the indices of its results that
    /// hold the next loss scale and the all-finite flag (1 = the step was
    /// taken, 0 = skipped): an i64 array [scale, finite].
    static constexpr ::llvm::StringLiteral kLossScaleResultsAttrName =
        "par.loss_scale_results";
    /// On a train step or stage update par-compress-gradients rewrote: a
    /// dictionary {method (string), compressed_bytes and uncompressed_bytes
    /// (f64: the bytes per step and rank its compressed exchanges send, and
    /// what the fp32 ring all-reduces of the same gradients would send)}.
    static constexpr ::llvm::StringLiteral kCompressionAttrName =
        "par.compression";
    /// On a function argument: an error-feedback buffer of
    /// par-compress-gradients (state fed back like optimizer state; one row
    /// per device).
    static constexpr ::llvm::StringLiteral kErrorFeedbackAttrName =
        "par.error_feedback";
    /// On a function argument: par-compress-gradients' step counter (a
    /// replicated tensor<f32>, zeros at first) for its warm-up.
    static constexpr ::llvm::StringLiteral kCompressionStepAttrName =
        "par.compression_step";
    /// Frontend names and data roles (par-import, the PyTorch frontend),
    /// on function arguments; par-autodiff, par-optimizer and
    /// par-pipeline-split carry them to the functions they make, the
    /// manifest exports them and par-run reads them.
    /// The PyTorch name of a parameter (named_parameters()): a non-empty
    /// StringAttr, unique among the function's arguments.
    static constexpr ::llvm::StringLiteral kNameAttrName = "par.name";
    /// The other state_dict names of a tied parameter: an ArrayAttr of
    /// non-empty StringAttrs, on an argument with a par.name; no name
    /// appears twice in a function.
    static constexpr ::llvm::StringLiteral kAliasesAttrName = "par.aliases";
    /// A parameter that is one segment of a fused PyTorch parameter
    /// (par-import splits q|k|v and gate|up projections per segment):
    /// {of = "name", dim = d, offset = o}, the argument's global shape
    /// being the slice [o, o + size) of dimension d of the tensor `of`
    /// names, the size its own dimension d. par-run loads it from that
    /// tensor and saves the segments back into it. Needs a par.name.
    static constexpr ::llvm::StringLiteral kSliceAttrName = "par.slice";
    /// The role of an integer data argument: "tokens" or "targets".
    static constexpr ::llvm::StringLiteral kDataAttrName = "par.data";
    /// With par.data: the values lie in [0, vocab) (a positive i64).
    static constexpr ::llvm::StringLiteral kVocabAttrName = "par.vocab";
    /// Pipeline parallelism. On an op: the stage a user pins it to (an i64).
    /// On a function par-pipeline-split made: the stage it computes.
    static constexpr ::llvm::StringLiteral kStageAttrName = "par.stage";
    /// On a stage function: for each leading argument, the index of the
    /// argument of the split function it stands for (an i64 array).
    static constexpr ::llvm::StringLiteral kStageArgsAttrName =
        "par.stage_args";
    /// On a stage function differentiating only half of the backward:
    /// "input" (the input's gradient) or "weight" (the parameters').
    static constexpr ::llvm::StringLiteral kStagePartAttrName =
        "par.stage_part";
    /// On the module: a #par.pipeline, what par-pipeline-split made (the
    /// split function and the stage table) and par-pipeline-schedule's
    /// per-rank programs.
    static constexpr ::llvm::StringLiteral kPipelineAttrName = "par.pipeline";
    /// The links between functions, each a symbol reference on a function
    /// (passes and drivers follow them; nothing finds a function by name).
    /// On a function par-autodiff differentiated: its gradient; on a train
    /// step: the gradient it calls.
    static constexpr ::llvm::StringLiteral kGradAttrName = "par.grad";
    /// On a forward + loss: the train step par-optimizer made from it.
    static constexpr ::llvm::StringLiteral kStepAttrName = "par.step";
    /// On a pipeline stage's loss: the update par-optimizer made for it.
    static constexpr ::llvm::StringLiteral kUpdateAttrName = "par.update";
    /// On a forward + loss (written by the user) and its train step: the
    /// function computing the logits from the same arguments without the
    /// targets, for sampling.
    static constexpr ::llvm::StringLiteral kLogitsAttrName = "par.logits";
  }];
}

class Par_Op<string mnemonic, list<Trait> traits = []>
    : Op<Par_Dialect, mnemonic, traits>;

#endif // PAR_DIALECT_PAR_IR_PARDIALECT_TD

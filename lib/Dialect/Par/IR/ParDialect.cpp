//===- ParDialect.cpp - par dialect, attributes and ops -------------------===//

#include "par/Dialect/Par/IR/ParDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::par;

#include "par/Dialect/Par/IR/ParDialect.cpp.inc"
#include "par/Dialect/Par/IR/ParEnums.cpp.inc"

void ParDialect::initialize() {
  registerAttributes();
  addOperations<
#define GET_OP_LIST
#include "par/Dialect/Par/IR/ParOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

static std::string formatAxes(ArrayRef<StringRef> axes) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "[";
  llvm::interleaveComma(axes, os, [&](StringRef a) { os << "\"" << a << "\""; });
  os << "]";
  return s;
}

MeshOp mlir::par::lookupMesh(Operation *from, FlatSymbolRefAttr symbol,
                             bool emitErrors) {
  if (!symbol) {
    if (emitErrors)
      from->emitError("missing mesh reference");
    return {};
  }
  Operation *found = SymbolTable::lookupNearestSymbolFrom(from, symbol);
  auto mesh = dyn_cast_or_null<MeshOp>(found);
  if (!mesh && emitErrors)
    from->emitError() << "'" << symbol.getValue()
                      << "' does not reference a par.mesh";
  return mesh;
}

/// "unknown mesh @m" or "@m, which is not a par.mesh", for diagnostics.
static std::string describeBadMesh(Operation *from, FlatSymbolRefAttr sym) {
  if (SymbolTable::lookupNearestSymbolFrom(from, sym))
    return ("@" + sym.getValue() + ", which is not a par.mesh").str();
  return ("unknown mesh @" + sym.getValue()).str();
}

ShardingAttr mlir::par::getShardingAnnotation(Operation *op) {
  return op->getAttrOfType<ShardingAttr>(ParDialect::kShardingAttrName);
}

Value mlir::par::createFloatCast(OpBuilder &b, Location loc, Value v,
                                 Type elt) {
  auto type = cast<RankedTensorType>(v.getType());
  auto from = cast<FloatType>(type.getElementType());
  if (from == elt)
    return v;
  int64_t r = type.getRank();
  return linalg::GenericOp::create(
             b, loc, TypeRange{type.clone(elt)}, ValueRange{v},
             ValueRange{tensor::EmptyOp::create(b, loc, type.getShape(), elt)},
             SmallVector<AffineMap>(2, b.getMultiDimIdentityMap(r)),
             SmallVector<utils::IteratorType>(r, utils::IteratorType::parallel),
             [&](OpBuilder &nb, Location l, ValueRange a) {
               Value c =
                   cast<FloatType>(elt).getWidth() < from.getWidth()
                       ? arith::TruncFOp::create(nb, l, elt, a[0]).getResult()
                       : arith::ExtFOp::create(nb, l, elt, a[0]).getResult();
               linalg::YieldOp::create(nb, l, c);
             })
      .getResult(0);
}

SmallVector<StringRef> mlir::par::getDataParallelAxes(FunctionOpInterface fn) {
  SmallVector<StringRef> axes;
  bool isForward = false;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    isForward |= (bool)fn.getArgAttr(i, ParDialect::kParamAttrName);
  if (!isForward)
    return axes;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
    if (fn.getArgAttr(i, ParDialect::kParamAttrName) ||
        fn.getArgAttr(i, ParDialect::kLossScaleAttrName))
      continue;
    auto s = fn.getArgAttrOfType<ShardingAttr>(i, ParDialect::kShardingAttrName);
    if (s && !s.getDims().empty())
      for (StringRef a : s.getDimAxes(0))
        if (!llvm::is_contained(axes, a))
          axes.push_back(a);
  }
  return axes;
}

LogicalResult
mlir::par::verifyShardingFor(function_ref<InFlightDiagnostic()> emitError,
                             ShardingAttr sharding, MeshOp mesh, Type type) {
  auto tensorType = dyn_cast<RankedTensorType>(type);
  if (!tensorType)
    return emitError() << "sharding " << sharding
                       << " is attached to a non-tensor value of type "
                       << type;
  if (sharding.getRank() != tensorType.getRank())
    return emitError() << "sharding " << sharding << " has rank "
                       << sharding.getRank() << " but the tensor "
                       << tensorType << " has rank " << tensorType.getRank();
  auto checkAxis = [&](StringRef axis) -> LogicalResult {
    if (mesh.getAxisIndex(axis) < 0)
      return emitError() << "unknown mesh axis '" << axis << "' (mesh @"
                         << mesh.getSymName() << " has axes "
                         << formatAxes(llvm::to_vector(llvm::map_range(
                                mesh.getAxisNames().getAsRange<StringAttr>(),
                                [](StringAttr s) { return s.getValue(); })))
                         << ")";
    return success();
  };
  for (int64_t d = 0; d < sharding.getRank(); ++d)
    for (StringRef axis : sharding.getDimAxes(d))
      if (failed(checkAxis(axis)))
        return failure();
  for (StringRef axis : sharding.getPartialAxisNames())
    if (failed(checkAxis(axis)))
      return failure();
  return success();
}

FailureOr<RankedTensorType>
mlir::par::getLocalType(function_ref<InFlightDiagnostic()> emitError,
                        RankedTensorType type, ShardingAttr sharding,
                        MeshOp mesh) {
  if (!sharding)
    return type;
  if (sharding.getRank() != type.getRank()) {
    emitError() << "sharding " << sharding << " does not match the rank of "
                << type;
    return failure();
  }
  SmallVector<int64_t> shape(type.getShape());
  for (int64_t d = 0; d < type.getRank(); ++d) {
    SmallVector<StringRef> axes = sharding.getDimAxes(d);
    if (axes.empty())
      continue;
    int64_t n = 1;
    for (StringRef a : axes) {
      int64_t size = mesh.getAxisSize(a);
      if (size < 0) {
        emitError() << "unknown mesh axis '" << a << "'";
        return failure();
      }
      n *= size;
    }
    if (ShapedType::isDynamic(shape[d])) {
      emitError() << "dimension " << d << " of " << type
                  << " is dynamic and cannot be split over mesh axes "
                  << formatAxes(axes);
      return failure();
    }
    if (shape[d] % n != 0) {
      emitError() << "dimension " << d << " (size " << shape[d] << ") of "
                  << type << " is not divisible by the " << n
                  << " devices of mesh axes " << formatAxes(axes);
      return failure();
    }
    shape[d] /= n;
  }
  return RankedTensorType::get(shape, type.getElementType(),
                               type.getEncoding());
}

//===----------------------------------------------------------------------===//
// Discardable attribute verification
//===----------------------------------------------------------------------===//

static LogicalResult verifyValueSharding(Operation *anchor, Attribute attr,
                                         Type type, StringRef what) {
  auto emit = [&]() { return anchor->emitError() << what << ": "; };
  auto sharding = dyn_cast<ShardingAttr>(attr);
  if (!sharding)
    return emit() << "'par.sharding' must be a #par.sharding attribute, got "
                  << attr;
  MeshOp mesh = lookupMesh(anchor, sharding.getMesh(), /*emitErrors=*/false);
  if (!mesh)
    return emit() << "sharding refers to "
                  << describeBadMesh(anchor, sharding.getMesh());
  return verifyShardingFor(emit, sharding, mesh, type);
}

static LogicalResult verifyGlobalType(Operation *op, NamedAttribute attr) {
  auto type = dyn_cast<TypeAttr>(attr.getValue());
  if (!type || !isa<RankedTensorType>(type.getValue()))
    return op->emitError() << "'" << attr.getName().getValue()
                           << "' must be a ranked tensor type";
  return success();
}

/// The frontend's attributes on argument `argIndex` of `op` (par.name,
/// par.aliases, par.data, par.vocab; ParDialect.td): their kinds, that an
/// alias list and a vocabulary come with what they qualify, that a data
/// role sits on an integer non-parameter, and that no PyTorch name (a
/// par.name or an alias) is given to two arguments of the function.
static LogicalResult verifyFrontendArgAttr(Operation *op, unsigned argIndex,
                                           NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  auto fn = dyn_cast<FunctionOpInterface>(op);
  if (!fn || argIndex >= fn.getNumArguments())
    return op->emitError() << "'" << name
                           << "' is only allowed on function arguments";
  auto emit = [&]() -> InFlightDiagnostic {
    return op->emitError() << "argument #" << argIndex << ": ";
  };
  // The PyTorch names an argument carries: its par.name and its aliases.
  auto namesOf = [&](unsigned i) {
    SmallVector<StringRef> names;
    if (auto n = fn.getArgAttrOfType<StringAttr>(i, ParDialect::kNameAttrName))
      names.push_back(n.getValue());
    if (auto a =
            fn.getArgAttrOfType<ArrayAttr>(i, ParDialect::kAliasesAttrName))
      for (Attribute x : a)
        if (auto s = dyn_cast<StringAttr>(x))
          names.push_back(s.getValue());
    return names;
  };
  auto unique = [&](StringRef n) -> LogicalResult {
    for (unsigned j = 0; j < fn.getNumArguments(); ++j)
      if (j != argIndex && llvm::is_contained(namesOf(j), n))
        return emit() << "the name '" << n << "' is also given to argument #"
                      << j << " (each parameter has its own names)";
    return success();
  };
  if (name == ParDialect::kNameAttrName) {
    auto s = dyn_cast<StringAttr>(attr.getValue());
    if (!s || s.getValue().empty())
      return emit() << "'par.name' must be a non-empty string, got "
                    << attr.getValue();
    return unique(s.getValue());
  }
  if (name == ParDialect::kAliasesAttrName) {
    auto a = dyn_cast<ArrayAttr>(attr.getValue());
    auto own = fn.getArgAttrOfType<StringAttr>(argIndex,
                                               ParDialect::kNameAttrName);
    if (!a)
      return emit() << "'par.aliases' must be an array of strings, got "
                    << attr.getValue();
    if (!own)
      return emit() << "'par.aliases' needs a 'par.name' on the same "
                       "argument (aliases are the other names of a named "
                       "parameter)";
    SmallVector<StringRef> seen{own.getValue()};
    for (Attribute x : a) {
      auto s = dyn_cast<StringAttr>(x);
      if (!s || s.getValue().empty())
        return emit() << "'par.aliases' must hold non-empty strings, got "
                      << x;
      if (llvm::is_contained(seen, s.getValue()))
        return emit() << "'par.aliases' repeats the name '" << s.getValue()
                      << "'";
      seen.push_back(s.getValue());
      if (failed(unique(s.getValue())))
        return failure();
    }
    return success();
  }
  if (name == ParDialect::kSliceAttrName) {
    auto d = dyn_cast<DictionaryAttr>(attr.getValue());
    auto of = d ? d.getAs<StringAttr>("of") : StringAttr();
    auto dim = d ? d.getAs<IntegerAttr>("dim") : IntegerAttr();
    auto offset = d ? d.getAs<IntegerAttr>("offset") : IntegerAttr();
    // Optional: the size of `of` in `dim` when the argument reaches past
    // its end (a vocabulary padded to a multiple of tp): padding rows.
    auto extent = d ? d.getAs<IntegerAttr>("extent") : IntegerAttr();
    auto shaped = dyn_cast<ShapedType>(fn.getArgumentTypes()[argIndex]);
    if (!of || of.getValue().empty() || !dim || !offset ||
        d.size() != (extent ? 4u : 3u))
      return emit() << "'par.slice' must be {of = \"name\", dim = i64, "
                       "offset = i64[, extent = i64]}, got "
                    << attr.getValue();
    if (!fn.getArgAttrOfType<StringAttr>(argIndex, ParDialect::kNameAttrName))
      return emit() << "'par.slice' needs a 'par.name' on the same argument";
    if (!shaped || !shaped.hasRank() || dim.getInt() < 0 ||
        dim.getInt() >= shaped.getRank() || offset.getInt() < 0)
      return emit() << "'par.slice' dim " << dim.getInt() << " offset "
                    << offset.getInt() << " does not fit the argument's type "
                    << fn.getArgumentTypes()[argIndex];
    // The argument's global size is not its type's once partitioned: the
    // runner checks the extent against it (and the weights file).
    if (extent && extent.getInt() <= offset.getInt())
      return emit() << "'par.slice' extent " << extent.getInt()
                    << " must lie past the offset " << offset.getInt()
                    << ": the tensor ends there, inside the argument";
    return success();
  }
  if (name == ParDialect::kDataAttrName) {
    auto s = dyn_cast<StringAttr>(attr.getValue());
    if (!s || (s.getValue() != "tokens" && s.getValue() != "targets"))
      return emit() << "'par.data' must be \"tokens\" or \"targets\", got "
                    << attr.getValue();
    auto shaped = dyn_cast<ShapedType>(fn.getArgumentTypes()[argIndex]);
    if (!shaped || !isa<IntegerType>(shaped.getElementType()))
      return emit() << "'par.data' = \"" << s.getValue()
                    << "\" needs an integer tensor, got "
                    << fn.getArgumentTypes()[argIndex];
    if (fn.getArgAttr(argIndex, ParDialect::kParamAttrName))
      return emit() << "'par.data' marks a data argument, which cannot also "
                       "be a parameter ('par.param')";
    if (!fn.getArgAttr(argIndex, ParDialect::kVocabAttrName))
      return emit() << "'par.data' = \"" << s.getValue()
                    << "\" needs 'par.vocab' (its values lie in [0, vocab))";
    return success();
  }
  // par.vocab
  auto v = dyn_cast<IntegerAttr>(attr.getValue());
  if (!v || !v.getType().isInteger(64) || v.getInt() <= 0)
    return emit() << "'par.vocab' must be a positive i64, got "
                  << attr.getValue();
  if (!fn.getArgAttr(argIndex, ParDialect::kDataAttrName))
    return emit() << "'par.vocab' needs 'par.data' (\"tokens\" or "
                     "\"targets\") on the same argument";
  return success();
}

LogicalResult ParDialect::verifyRegionArgAttribute(Operation *op,
                                                   unsigned regionIndex,
                                                   unsigned argIndex,
                                                   NamedAttribute attr) {
  if (attr.getName() == kGlobalTypeAttrName)
    return verifyGlobalType(op, attr);
  if (attr.getName() == kInitAttrName) {
    if (!isa<InitAttr>(attr.getValue()))
      return op->emitError() << "'par.init' must be a #par.init attribute "
                                "(zeros, ones, uniform with a scale or fill with a value), got "
                             << attr.getValue();
    return success();
  }
  if (attr.getName() == kLossScaleAttrName) {
    // The argument is a tensor<f32> (par-loss-scale makes it); it stays
    // marked through bufferization and lowering.
    auto fn = dyn_cast<FunctionOpInterface>(op);
    auto shaped = fn && argIndex < fn.getNumArguments()
                      ? dyn_cast<ShapedType>(fn.getArgumentTypes()[argIndex])
                      : ShapedType();
    if (!isa<LossScaleAttr>(attr.getValue()) || !shaped ||
        !shaped.hasRank() || shaped.getRank() != 0 ||
        !shaped.getElementType().isF32())
      return op->emitError("'par.loss_scale' must be a #par.loss_scale "
                           "policy on a scalar f32 (tensor<f32>) function "
                           "argument");
    return success();
  }
  if (attr.getName() == kParamAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError("'par.param' is a unit attribute");
    return success();
  }
  if (attr.getName() == kNameAttrName || attr.getName() == kAliasesAttrName ||
      attr.getName() == kSliceAttrName || attr.getName() == kDataAttrName || attr.getName() == kVocabAttrName)
    return verifyFrontendArgAttr(op, argIndex, attr);
  if (attr.getName() == kErrorFeedbackAttrName ||
      attr.getName() == kCompressionStepAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError() << "'" << attr.getName().getValue()
                             << "' is a unit attribute";
    return success();
  }
  if (attr.getName() != kShardingAttrName)
    return op->emitError() << "unknown par attribute " << attr.getName()
                           << " on a region argument";
  auto fn = dyn_cast<FunctionOpInterface>(op);
  if (!fn || regionIndex != 0 || argIndex >= fn.getNumArguments())
    return op->emitError("'par.sharding' on a region argument is only "
                         "allowed on function arguments");
  return verifyValueSharding(op, attr.getValue(),
                             fn.getArgumentTypes()[argIndex],
                             ("argument #" + Twine(argIndex)).str());
}

LogicalResult ParDialect::verifyRegionResultAttribute(Operation *op,
                                                      unsigned regionIndex,
                                                      unsigned resultIndex,
                                                      NamedAttribute attr) {
  if (attr.getName() == kGlobalTypeAttrName)
    return verifyGlobalType(op, attr);
  if (attr.getName() != kShardingAttrName)
    return op->emitError() << "unknown par attribute " << attr.getName()
                           << " on a function result";
  auto fn = dyn_cast<FunctionOpInterface>(op);
  if (!fn || resultIndex >= fn.getNumResults())
    return op->emitError("'par.sharding' on a result is only allowed on "
                         "function results");
  return verifyValueSharding(op, attr.getValue(),
                             fn.getResultTypes()[resultIndex],
                             ("result #" + Twine(resultIndex)).str());
}

/// `sym` names a function in the symbol table around `op`.
static LogicalResult verifyNamesFunction(Operation *op, FlatSymbolRefAttr sym,
                                         const std::string &what) {
  if (isa_and_nonnull<FunctionOpInterface>(
          SymbolTable::lookupNearestSymbolFrom(op, sym)))
    return success();
  return op->emitError() << what << " names " << sym
                         << ", which is not a function in the module";
}

/// `par.pipeline`: a #par.pipeline on a module whose every symbol names one
/// of the module's functions.
static LogicalResult verifyPipelineSymbols(Operation *op, Attribute value) {
  auto pipe = dyn_cast<PipelineAttr>(value);
  if (!isa<ModuleOp>(op) || !pipe)
    return op->emitError("'par.pipeline' must be a #par.pipeline on a module");
  if (failed(verifyNamesFunction(op, pipe.getFunc(), "'par.pipeline' func")))
    return failure();
  for (auto [role, sym] : {std::pair<StringRef, FlatSymbolRefAttr>{
                               "step", pipe.getStep()},
                           {"logits", pipe.getLogits()}})
    if (sym && failed(verifyNamesFunction(
                   op, sym, ("'par.pipeline' " + role).str())))
      return failure();
  for (auto [k, stage] : llvm::enumerate(pipe.getStages()))
    for (auto [role, sym] : stage.getSymbols())
      if (failed(verifyNamesFunction(
              op, sym,
              ("'par.pipeline' stage " + Twine(k) + "'s " + role).str())))
        return failure();
  return success();
}

LogicalResult ParDialect::verifyOperationAttribute(Operation *op,
                                                   NamedAttribute attr) {
  // On ops, `par.sharding` holds one entry per result: a #par.sharding for a
  // tensor result, a unit attribute for any other result. Propagation writes
  // it; partitioning reads it.
  if (attr.getName() == kDonatedDroppedAttrName) {
    auto pairs = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!pairs || !isa<FunctionOpInterface>(op) || pairs.size() % 2 != 0)
      return op->emitError("'par.donated_dropped' must be an array of "
                           "(result, argument) index pairs on a function");
    return success();
  }
  if (attr.getName() == kFeedbackAttrName ||
      attr.getName() == kDonatedAttrName) {
    // Pairs (result, argument): after a step, the result feeds the
    // argument (par.feedback) or is written into its buffer (par.donated).
    StringRef name = attr.getName().getValue();
    auto pairs = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    auto fn = dyn_cast<FunctionOpInterface>(op);
    if (!pairs || !fn || pairs.size() % 2 != 0)
      return op->emitError() << "'" << name
                             << "' must be an array of (result, argument) "
                                "index pairs on a function";
    llvm::SmallDenseSet<int64_t> results, args;
    for (size_t i = 0; i < pairs.size(); i += 2) {
      int64_t r = pairs[i], a = pairs[i + 1];
      if (r < 0 || r >= (int64_t)fn.getNumResults() || a < 0 ||
          a >= (int64_t)fn.getNumArguments())
        return op->emitError() << "'" << name << "' pair (" << r << ", " << a
                               << ") is out of range";
      if (fn.getResultTypes()[r] != fn.getArgumentTypes()[a])
        return op->emitError() << "'" << name << "' pairs result #" << r
                               << " with argument #" << a
                               << " of a different type";
      if (name == kDonatedAttrName &&
          (!results.insert(r).second || !args.insert(a).second))
        return op->emitError() << "'par.donated' names result #" << r
                               << " or argument #" << a << " twice";
    }
    return success();
  }
  if (attr.getName() == kStageAttrName) {
    auto k = dyn_cast<IntegerAttr>(attr.getValue());
    if (!k || k.getInt() < 0)
      return op->emitError("'par.stage' must be a non-negative integer");
    return success();
  }
  if (attr.getName() == kStageArgsAttrName) {
    auto fn = dyn_cast<FunctionOpInterface>(op);
    auto idx = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!fn || !idx || idx.size() > fn.getNumArguments())
      return op->emitError("'par.stage_args' must be an i64 array with at "
                           "most one entry per function argument");
    return success();
  }
  if (attr.getName() == kStagePartAttrName) {
    auto part = dyn_cast<StringAttr>(attr.getValue());
    if (!part || (part.getValue() != "input" && part.getValue() != "weight"))
      return op->emitError("'par.stage_part' must be \"input\" or "
                           "\"weight\"");
    return success();
  }
  if (attr.getName() == kPipelineAttrName)
    return verifyPipelineSymbols(op, attr.getValue());
  if (llvm::is_contained({kGradAttrName, kStepAttrName, kUpdateAttrName,
                          kLogitsAttrName},
                         attr.getName().getValue())) {
    auto sym = dyn_cast<FlatSymbolRefAttr>(attr.getValue());
    if (!sym || !isa<FunctionOpInterface>(op))
      return op->emitError() << "'" << attr.getName().getValue()
                             << "' must be a symbol reference on a function";
    return verifyNamesFunction(op, sym, "'" + attr.getName().str() + "'");
  }
  if (attr.getName() == kMicroBatchesAttrName) {
    auto m = dyn_cast<IntegerAttr>(attr.getValue());
    if (!m || !isa<FunctionOpInterface>(op) || m.getInt() < 1)
      return op->emitError("'par.micro_batches' must be a positive integer "
                           "on a function");
    return success();
  }
  if (attr.getName() == kLossScaleResultsAttrName) {
    auto idx = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    auto fn = dyn_cast<FunctionOpInterface>(op);
    // Indices of the tensor-level results (lowering may pack them).
    if (!idx || !fn || idx.size() != 2 ||
        llvm::any_of(idx.asArrayRef(), [&](int64_t i) { return i < 0; }))
      return op->emitError("'par.loss_scale_results' must be [scale, finite] "
                           "result indices of a function");
    return success();
  }
  if (attr.getName() == kMixedPrecisionAttrName) {
    auto t = dyn_cast<TypeAttr>(attr.getValue());
    if (!t || !isa<FunctionOpInterface>(op) ||
        !isa<Float16Type, BFloat16Type>(t.getValue()))
      return op->emitError("'par.mixed_precision' must be the compute type "
                           "(f16 or bf16) on a function");
    return success();
  }
  if (attr.getName() == kCompressionAttrName) {
    auto d = dyn_cast<DictionaryAttr>(attr.getValue());
    if (!d || !isa<FunctionOpInterface>(op) ||
        !isa_and_nonnull<StringAttr>(d.get("method")) ||
        !isa_and_nonnull<FloatAttr>(d.get("compressed_bytes")) ||
        !isa_and_nonnull<FloatAttr>(d.get("uncompressed_bytes")))
      return op->emitError("'par.compression' must be a dictionary {method "
                           "(string), compressed_bytes, uncompressed_bytes "
                           "(floats)} on a function");
    return success();
  }
  if (attr.getName() == kKernelAttrName) {
    if (!isa<UnitAttr>(attr.getValue()) || !isa<FunctionOpInterface>(op))
      return op->emitError("'par.kernel' is a unit attribute on a function");
    return success();
  }
  if (attr.getName() == kPrecisionAttrName) {
    auto p = dyn_cast<StringAttr>(attr.getValue());
    if (!p || (p.getValue() != "f32" && p.getValue() != "compute"))
      return op->emitError("'par.precision' must be \"f32\" or \"compute\"");
    return success();
  }
  if (attr.getName() == kZeROGatherAttrName) {
    auto p = dyn_cast<StringAttr>(attr.getValue());
    if (!p || (p.getValue() != "forward" && p.getValue() != "backward"))
      return op->emitError("'par.zero_gather' must be \"forward\" or "
                           "\"backward\"");
    return success();
  }
  if (attr.getName() == kSPGatherAttrName) {
    auto p = dyn_cast<StringAttr>(attr.getValue());
    if (!p || p.getValue() != "backward")
      return op->emitError("'par.sp_gather' must be \"backward\"");
    return success();
  }
  if (attr.getName() != kShardingAttrName)
    return op->emitError() << "unknown par attribute " << attr.getName();
  auto list = dyn_cast<ArrayAttr>(attr.getValue());
  if (!list)
    return op->emitError("'par.sharding' on an op must be an array with one "
                         "sharding per result");
  if (list.size() != op->getNumResults())
    return op->emitError() << "'par.sharding' has " << list.size()
                           << " entries but the op has "
                           << op->getNumResults() << " result(s)";
  for (auto [i, entry] : llvm::enumerate(list)) {
    if (isa<UnitAttr>(entry) && !isa<RankedTensorType>(op->getResult(i).getType()))
      continue;
    if (failed(verifyValueSharding(op, entry, op->getResult(i).getType(),
                                   ("result #" + Twine(i)).str())))
      return failure();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// MeshOp
//===----------------------------------------------------------------------===//

static ParseResult parseMeshAxes(OpAsmParser &p, ArrayAttr &names,
                                 DenseI64ArrayAttr &sizes) {
  SmallVector<Attribute> nameAttrs;
  SmallVector<int64_t> sizeValues;
  if (p.parseCommaSeparatedList(OpAsmParser::Delimiter::Square, [&]() {
        std::string name;
        int64_t size;
        if (p.parseString(&name) || p.parseEqual() || p.parseInteger(size))
          return failure();
        nameAttrs.push_back(p.getBuilder().getStringAttr(name));
        sizeValues.push_back(size);
        return success();
      }))
    return failure();
  names = p.getBuilder().getArrayAttr(nameAttrs);
  sizes = p.getBuilder().getDenseI64ArrayAttr(sizeValues);
  return success();
}

static void printMeshAxes(OpAsmPrinter &p, MeshOp, ArrayAttr names,
                          DenseI64ArrayAttr sizes) {
  p << "[";
  llvm::interleaveComma(llvm::zip(names, sizes.asArrayRef()), p,
                        [&](auto pair) {
                          p.printString(
                              cast<StringAttr>(std::get<0>(pair)).getValue());
                          p << "=" << std::get<1>(pair);
                        });
  p << "]";
}

LogicalResult MeshOp::verify() {
  if (getAxisNames().size() != getAxisSizes().size())
    return emitOpError("needs one size per axis name");
  if (getAxisNames().empty())
    return emitOpError("needs at least one axis");
  llvm::StringSet<> seen;
  for (auto [name, size] :
       llvm::zip(getAxisNames().getAsRange<StringAttr>(), getAxisSizes())) {
    if (name.getValue().empty())
      return emitOpError("axis names must not be empty");
    if (!seen.insert(name.getValue()).second)
      return emitOpError() << "duplicate mesh axis '" << name.getValue()
                           << "'";
    if (size <= 0)
      return emitOpError() << "mesh axis '" << name.getValue()
                           << "' must have a positive size, got " << size;
  }
  return success();
}

int64_t MeshOp::getAxisIndex(StringRef name) {
  for (auto [i, n] : llvm::enumerate(getAxisNames().getAsRange<StringAttr>()))
    if (n.getValue() == name)
      return i;
  return -1;
}

int64_t MeshOp::getAxisSize(StringRef name) {
  int64_t i = getAxisIndex(name);
  return i < 0 ? -1 : getAxisSizes()[i];
}

int64_t MeshOp::getNumDevices() {
  int64_t n = 1;
  for (int64_t s : getAxisSizes())
    n *= s;
  return n;
}

//===----------------------------------------------------------------------===//
// Annotations
//===----------------------------------------------------------------------===//

template <typename OpTy>
static LogicalResult verifyAnnotationSymbols(OpTy op,
                                             SymbolTableCollection &tables) {
  auto mesh = tables.lookupNearestSymbolFrom<MeshOp>(
      op, op.getSharding().getMesh());
  if (!mesh)
    return op.emitOpError() << "sharding refers to "
                            << describeBadMesh(op, op.getSharding().getMesh());
  return verifyShardingFor([&]() { return op.emitOpError(); },
                           op.getSharding(), mesh, op.getInput().getType());
}

LogicalResult
ShardingConstraintOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyAnnotationSymbols(*this, tables);
}

LogicalResult ReshardOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyAnnotationSymbols(*this, tables);
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

/// Checks the axes of a collective against its mesh; returns the group size
/// (product of the axes' sizes) or failure.
static FailureOr<int64_t> verifyAxes(Operation *op, FlatSymbolRefAttr meshSym,
                                     ArrayAttr axes) {
  auto mesh = dyn_cast_or_null<MeshOp>(
      SymbolTable::lookupNearestSymbolFrom(op, meshSym));
  if (!mesh)
    return op->emitOpError() << "refers to " << describeBadMesh(op, meshSym);
  if (axes.empty())
    return op->emitOpError("needs at least one mesh axis");
  llvm::StringSet<> seen;
  int64_t n = 1;
  for (StringAttr a : axes.getAsRange<StringAttr>()) {
    int64_t size = mesh.getAxisSize(a.getValue());
    if (size < 0)
      return op->emitOpError() << "unknown mesh axis '" << a.getValue()
                               << "' (mesh @" << mesh.getSymName() << ")";
    if (!seen.insert(a.getValue()).second)
      return op->emitOpError() << "mesh axis '" << a.getValue()
                               << "' is listed twice";
    n *= size;
  }
  return n;
}

static int64_t groupSizeOf(Operation *op, FlatSymbolRefAttr meshSym,
                           ArrayAttr axes) {
  auto mesh = dyn_cast_or_null<MeshOp>(
      SymbolTable::lookupNearestSymbolFrom(op, meshSym));
  if (!mesh)
    return -1;
  int64_t n = 1;
  for (StringAttr a : axes.getAsRange<StringAttr>())
    n *= std::max<int64_t>(1, mesh.getAxisSize(a.getValue()));
  return n;
}

static LogicalResult checkDim(Operation *op, int64_t dim, int64_t rank,
                              StringRef name) {
  if (dim < 0 || dim >= rank)
    return op->emitOpError() << name << " " << dim
                             << " is out of range for a tensor of rank "
                             << rank;
  return success();
}

/// Checks that result dim `d` equals input dim `d` times `mul` divided by
/// `div`, and all other dims match, skipping dynamic sizes.
static LogicalResult checkShapes(Operation *op, ShapedType in,
                                 ShapedType out,
                                 ArrayRef<std::pair<int64_t, std::pair<int64_t, int64_t>>> scaled) {
  if (in.getRank() != out.getRank())
    return op->emitOpError("input and result must have the same rank");
  if (in.getElementType() != out.getElementType())
    return op->emitOpError("input and result must have the same element type");
  for (int64_t d = 0; d < in.getRank(); ++d) {
    int64_t expect = in.getDimSize(d);
    if (ShapedType::isDynamic(expect))
      continue;
    for (auto &[sd, md] : scaled) {
      if (sd != d)
        continue;
      if (expect % md.second != 0)
        return op->emitOpError()
               << "dimension " << d << " of size " << expect
               << " is not divisible by the group size " << md.second;
      expect = expect * md.first / md.second;
    }
    if (out.isDynamicDim(d))
      continue;
    if (out.getDimSize(d) != expect)
      return op->emitOpError() << "result dimension " << d << " should be "
                               << expect << ", got " << out.getDimSize(d);
  }
  return success();
}

#define PAR_COLLECTIVE_COMMON(OpTy)                                            \
  LogicalResult OpTy::verifySymbolUses(SymbolTableCollection &) {              \
    return success();                                                          \
  }
#define PAR_COLLECTIVE_GROUP_SIZE(OpTy)                                        \
  int64_t OpTy::getGroupSize() {                                               \
    return groupSizeOf(getOperation(), getMeshAttr(), getAxes());              \
  }

PAR_COLLECTIVE_COMMON(AllReduceOp)
PAR_COLLECTIVE_COMMON(AllGatherOp)
PAR_COLLECTIVE_COMMON(ReduceScatterOp)
PAR_COLLECTIVE_COMMON(AllToAllOp)
PAR_COLLECTIVE_COMMON(BroadcastOp)
PAR_COLLECTIVE_COMMON(AllSliceOp)
PAR_COLLECTIVE_COMMON(SendOp)
PAR_COLLECTIVE_COMMON(RecvOp)
PAR_COLLECTIVE_COMMON(BucketAllReduceOp)
PAR_COLLECTIVE_GROUP_SIZE(BucketAllReduceOp)
PAR_COLLECTIVE_GROUP_SIZE(AllReduceOp)
PAR_COLLECTIVE_GROUP_SIZE(AllGatherOp)
PAR_COLLECTIVE_GROUP_SIZE(ReduceScatterOp)
PAR_COLLECTIVE_GROUP_SIZE(AllToAllOp)
PAR_COLLECTIVE_GROUP_SIZE(BroadcastOp)
PAR_COLLECTIVE_GROUP_SIZE(AllSliceOp)
PAR_COLLECTIVE_GROUP_SIZE(SendOp)
PAR_COLLECTIVE_GROUP_SIZE(RecvOp)
PAR_COLLECTIVE_COMMON(BufferAllReduceOp)
PAR_COLLECTIVE_COMMON(BufferAllGatherOp)
PAR_COLLECTIVE_COMMON(BufferReduceScatterOp)
PAR_COLLECTIVE_COMMON(BufferAllToAllOp)
PAR_COLLECTIVE_COMMON(BufferBroadcastOp)
PAR_COLLECTIVE_COMMON(BufferAllSliceOp)
PAR_COLLECTIVE_COMMON(BufferSendOp)
PAR_COLLECTIVE_COMMON(BufferRecvOp)
PAR_COLLECTIVE_COMMON(BufferBucketAllReduceOp)
PAR_COLLECTIVE_COMMON(BufferAllReduceStartOp)
PAR_COLLECTIVE_COMMON(BufferAllGatherStartOp)
#undef PAR_COLLECTIVE_COMMON
#undef PAR_COLLECTIVE_GROUP_SIZE

// One verifier per collective kind, shared by the tensor and buffer forms.

static LogicalResult verifyAllReduce(Operation *op, FlatSymbolRefAttr mesh,
                                     ArrayAttr axes, ShapedType in,
                                     ShapedType out) {
  if (failed(verifyAxes(op, mesh, axes)))
    return failure();
  return checkShapes(op, in, out, {});
}

/// A bucket: one or more members, each an all_reduce of its input into its
/// output, all of one element type (the runtime packs them into one
/// buffer of that type).
static LogicalResult verifyBucket(Operation *op, FlatSymbolRefAttr mesh,
                                  ArrayAttr axes, TypeRange ins,
                                  TypeRange outs) {
  if (failed(verifyAxes(op, mesh, axes)))
    return failure();
  if (ins.empty())
    return op->emitOpError("needs at least one member");
  if (ins.size() != outs.size())
    return op->emitOpError() << "has " << ins.size() << " inputs but "
                             << outs.size() << " outputs";
  Type element = cast<ShapedType>(ins.front()).getElementType();
  for (auto [i, types] : llvm::enumerate(llvm::zip(ins, outs))) {
    auto in = cast<ShapedType>(std::get<0>(types));
    auto out = cast<ShapedType>(std::get<1>(types));
    if (in.getElementType() != element)
      return op->emitOpError()
             << "member #" << i << " has element type " << in.getElementType()
             << ", the bucket's is " << element;
    if (failed(checkShapes(op, in, out, {})))
      return failure();
  }
  return success();
}

/// all_gather (`gather` = true: dim grows n-fold), reduce_scatter and
/// all_slice (dim shrinks n-fold).
static LogicalResult verifyResize(Operation *op, FlatSymbolRefAttr mesh,
                                  ArrayAttr axes, ShapedType in,
                                  ShapedType out, int64_t dim, bool gather) {
  FailureOr<int64_t> n = verifyAxes(op, mesh, axes);
  if (failed(n) || failed(checkDim(op, dim, in.getRank(), "dim")))
    return failure();
  return checkShapes(op, in, out,
                     {{dim, gather ? std::make_pair(*n, int64_t(1))
                                   : std::make_pair(int64_t(1), *n)}});
}

static LogicalResult verifyAllToAll(Operation *op, FlatSymbolRefAttr mesh,
                                    ArrayAttr axes, ShapedType in,
                                    ShapedType out, int64_t splitDim,
                                    int64_t concatDim) {
  FailureOr<int64_t> n = verifyAxes(op, mesh, axes);
  int64_t rank = in.getRank();
  if (failed(n) || failed(checkDim(op, splitDim, rank, "split_dim")) ||
      failed(checkDim(op, concatDim, rank, "concat_dim")))
    return failure();
  return checkShapes(op, in, out,
                     {{splitDim, {1, *n}}, {concatDim, {*n, 1}}});
}

/// The coordinates of one device of the group (broadcast's root, send's
/// destination, recv's source).
static LogicalResult verifyPeer(Operation *op, FlatSymbolRefAttr meshSym,
                                ArrayAttr axes, ArrayRef<int64_t> coords,
                                StringRef name) {
  if (failed(verifyAxes(op, meshSym, axes)))
    return failure();
  if (coords.size() != axes.size())
    return op->emitOpError() << name << " needs one coordinate per axis ("
                             << axes.size() << "), got " << coords.size();
  auto mesh = lookupMesh(op, meshSym);
  for (auto [axis, c] : llvm::zip(axes.getAsRange<StringAttr>(), coords))
    if (c < 0 || c >= mesh.getAxisSize(axis.getValue()))
      return op->emitOpError() << name << " coordinate " << c
                               << " is out of range for mesh axis '"
                               << axis.getValue() << "'";
  return success();
}

LogicalResult AllReduceOp::verify() {
  return verifyAllReduce(*this, getMeshAttr(), getAxes(), getInput().getType(),
                         getResult().getType());
}
LogicalResult BufferAllReduceOp::verify() {
  return verifyAllReduce(*this, getMeshAttr(), getAxes(), getInput().getType(),
                         getOutput().getType());
}

LogicalResult BucketAllReduceOp::verify() {
  return verifyBucket(*this, getMeshAttr(), getAxes(), getInputs().getTypes(),
                      getResults().getTypes());
}
LogicalResult BufferBucketAllReduceOp::verify() {
  return verifyBucket(*this, getMeshAttr(), getAxes(), getInputs().getTypes(),
                      getOutputs().getTypes());
}
/// A request never waited for would leave its transfer (and the runtime's
/// record of it) open; two waits would complete it twice.
static LogicalResult verifyRequest(Operation *op, Value request) {
  if (!request.hasOneUse() ||
      !isa<BufferWaitOp>(*request.getUsers().begin()))
    return op->emitOpError("request must be completed by exactly one "
                           "par.buffer_wait");
  return success();
}
LogicalResult BufferAllReduceStartOp::verify() {
  if (failed(verifyBucket(*this, getMeshAttr(), getAxes(),
                          getInputs().getTypes(), getOutputs().getTypes())))
    return failure();
  return verifyRequest(*this, getRequest());
}
LogicalResult BufferAllGatherStartOp::verify() {
  if (failed(verifyResize(*this, getMeshAttr(), getAxes(),
                          getInput().getType(), getOutput().getType(),
                          getDim(), /*gather=*/true)))
    return failure();
  return verifyRequest(*this, getRequest());
}
LogicalResult BufferWaitOp::verify() {
  Operation *start = getRequest().getDefiningOp();
  if (!isa_and_nonnull<BufferAllReduceStartOp, BufferAllGatherStartOp>(start))
    return emitOpError("request must come from a par.buffer_all_reduce_start "
                       "or a par.buffer_all_gather_start");
  if (start->getBlock() != (*this)->getBlock())
    return emitOpError() << "must be in the block of its "
                         << start->getName().getStringRef();
  ValueRange ins, outs;
  if (auto reduce = dyn_cast<BufferAllReduceStartOp>(start)) {
    ins = reduce.getInputs();
    outs = reduce.getOutputs();
  } else {
    // Operand 0 is the input, operand 1 the output.
    ins = start->getOperands().take_front();
    outs = start->getOperands().drop_front();
  }
  if (!llvm::equal(ins, getInputs()) || !llvm::equal(outs, getOutputs()))
    return emitOpError() << "must name the buffers of its "
                         << start->getName().getStringRef();
  return success();
}

LogicalResult AllGatherOp::verify() {
  return verifyResize(*this, getMeshAttr(), getAxes(), getInput().getType(),
                      getResult().getType(), getDim(), /*gather=*/true);
}
LogicalResult BufferAllGatherOp::verify() {
  return verifyResize(*this, getMeshAttr(), getAxes(), getInput().getType(),
                      getOutput().getType(), getDim(), /*gather=*/true);
}

LogicalResult ReduceScatterOp::verify() {
  return verifyResize(*this, getMeshAttr(), getAxes(), getInput().getType(),
                      getResult().getType(), getDim(), /*gather=*/false);
}
LogicalResult BufferReduceScatterOp::verify() {
  return verifyResize(*this, getMeshAttr(), getAxes(), getInput().getType(),
                      getOutput().getType(), getDim(), /*gather=*/false);
}

LogicalResult AllSliceOp::verify() {
  return verifyResize(*this, getMeshAttr(), getAxes(), getInput().getType(),
                      getResult().getType(), getDim(), /*gather=*/false);
}
LogicalResult BufferAllSliceOp::verify() {
  return verifyResize(*this, getMeshAttr(), getAxes(), getInput().getType(),
                      getOutput().getType(), getDim(), /*gather=*/false);
}

LogicalResult AllToAllOp::verify() {
  return verifyAllToAll(*this, getMeshAttr(), getAxes(), getInput().getType(),
                        getResult().getType(), getSplitDim(), getConcatDim());
}
LogicalResult BufferAllToAllOp::verify() {
  return verifyAllToAll(*this, getMeshAttr(), getAxes(), getInput().getType(),
                        getOutput().getType(), getSplitDim(), getConcatDim());
}

LogicalResult BroadcastOp::verify() {
  return verifyPeer(*this, getMeshAttr(), getAxes(), getRoot(), "root");
}
LogicalResult BufferBroadcastOp::verify() {
  if (failed(verifyPeer(*this, getMeshAttr(), getAxes(), getRoot(), "root")))
    return failure();
  return checkShapes(*this, getInput().getType(), getOutput().getType(), {});
}

LogicalResult SendOp::verify() {
  return verifyPeer(*this, getMeshAttr(), getAxes(), getDest(), "dest");
}
LogicalResult BufferSendOp::verify() {
  return verifyPeer(*this, getMeshAttr(), getAxes(), getDest(), "dest");
}

LogicalResult RecvOp::verify() {
  return verifyPeer(*this, getMeshAttr(), getAxes(), getSource(), "source");
}
LogicalResult BufferRecvOp::verify() {
  return verifyPeer(*this, getMeshAttr(), getAxes(), getSource(), "source");
}

#define GET_OP_CLASSES
#include "par/Dialect/Par/IR/ParOps.cpp.inc"

//===- Manifest.cpp - Reading a compiled artifact's manifest --------------===//
//
// Reads a manifest with the JSON reader (Json.h; keys and values spelled
// by Schema.h, which par-export-manifest shares) and checks what the
// session relies on: the schema version is the one this runtime reads,
// shapes are integer lists of one rank, element types are in the dtype
// table, sharding axes name mesh axes, feedback pairs and stage arguments
// are in range, roles, the frontend's names and vocabularies and the
// compression entry are well formed. Keys a
// manifest lacks keep their defaults, so older manifests of the same
// version (without "compression" or "error_feedback" roles) read as they
// always did. Messages name the entry ("arg1", "result0")
// and the function, as par-run's always have.
//
//===----------------------------------------------------------------------===//

#include "par/Manifest/Manifest.h"

#include "par/Manifest/Json.h"
#include "par/Manifest/Schema.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

namespace par::manifest {

namespace {

/// Records the first error of a function entry.
struct Checker {
  std::string &error;
  bool failed() const { return !error.empty(); }
  void fail(const std::string &msg) {
    if (error.empty())
      error = "manifest: " + msg;
  }
};

std::vector<int64_t> intList(const std::vector<JsonValue> *a,
                             const std::string &what, Checker &c) {
  std::vector<int64_t> out;
  if (!a) {
    c.fail("missing " + what);
    return out;
  }
  for (const JsonValue &v : *a) {
    std::optional<int64_t> i = v.integer();
    if (!i || *i < 0) {
      c.fail(what + " must hold integers");
      return out;
    }
    out.push_back(*i);
  }
  return out;
}

std::string dtypeList() {
  std::string s;
  for (int64_t i = 0; i < par_dtype_count(); ++i)
    s += std::string(i ? ", " : "") + par_dtype_info_at(i)->name;
  return s;
}

int64_t axisIndex(const FunctionSpec &f, const std::string &name) {
  for (size_t i = 0; i < f.axisNames.size(); ++i)
    if (f.axisNames[i] == name)
      return i;
  return -1;
}

/// Resolves a list of axis names to mesh-axis indices.
std::vector<int64_t> axisList(const FunctionSpec &f,
                              const std::vector<JsonValue> *names,
                              Checker &c) {
  std::vector<int64_t> out;
  if (!names)
    return out;
  for (const JsonValue &x : *names)
    if (const std::string *s = x.string()) {
      int64_t i = axisIndex(f, *s);
      if (i < 0)
        c.fail("unknown mesh axis '" + *s + "'");
      out.push_back(i);
    }
  return out;
}

void parseSharding(const JsonValue &sh, const FunctionSpec &f, Tensor &t,
                   Checker &c) {
  if (const std::vector<JsonValue> *dims = sh.getArray(key::kDims))
    for (const JsonValue &d : *dims) {
      t.dims.push_back(axisList(f, d.array(), c));
    }
  t.partial = axisList(f, sh.getArray(key::kPartial), c);
  if (const std::string *k = sh.getString(key::kPartialKind))
    t.partialKind = *k == partial_kind::kMax   ? PAR_MAX
                    : *k == partial_kind::kMin ? PAR_MIN
                                               : PAR_SUM;
}

/// The frontend's optional keys: "name" (a non-empty string), "aliases"
/// (non-empty strings, only with a name), "slice" ({"of", "dim",
/// "offset"}, only with a name) and "vocab" (a positive integer).
void parseFrontendKeys(const JsonValue &v, const std::string &what,
                       Tensor &t, Checker &c) {
  if (const JsonValue *nv = v.get(key::kTensorName)) {
    const std::string *name = nv->string();
    if (!name || name->empty())
      c.fail(what + " has a bad name (expected a non-empty string)");
    else
      t.name = *name;
  }
  if (const JsonValue *av = v.get(key::kAliases)) {
    const std::vector<JsonValue> *list = av->array();
    if (!list || t.name.empty())
      c.fail(what + " has bad aliases (expected a list of names, with a "
                    "name)");
    else
      for (const JsonValue &x : *list) {
        const std::string *s = x.string();
        if (!s || s->empty()) {
          c.fail(what + " has bad aliases (expected non-empty strings)");
          break;
        }
        t.aliases.push_back(*s);
      }
  }
  if (const JsonValue *sv = v.get(key::kSlice)) {
    const JsonValue *of = sv->get(key::kSliceOf);
    const JsonValue *dim = sv->get(key::kSliceDim);
    const JsonValue *off = sv->get(key::kSliceOffset);
    const JsonValue *ext = sv->get(key::kSliceExtent);
    const std::string *s = of ? of->string() : nullptr;
    std::optional<int64_t> d = dim ? dim->integer() : std::nullopt;
    std::optional<int64_t> o = off ? off->integer() : std::nullopt;
    std::optional<int64_t> e = ext ? ext->integer() : std::optional<int64_t>(0);
    if (!s || s->empty() || !d || !o || *d < 0 || *o < 0 || t.name.empty() ||
        !e || *e < 0 || (*e && *e <= *o))
      c.fail(what + " has a bad slice (expected {\"of\": a name, \"dim\", "
                    "\"offset\": non-negative integers, optionally "
                    "\"extent\" past the offset}, with a name)");
    else {
      t.sliceOf = *s;
      t.sliceDim = *d;
      t.sliceOffset = *o;
      t.sliceExtent = *e;
    }
  }
  if (const JsonValue *vv = v.get(key::kVocab)) {
    std::optional<int64_t> n = vv->integer();
    if (!n || *n <= 0)
      c.fail(what + " has a bad vocab (expected a positive integer)");
    else
      t.vocab = *n;
  }
}

Tensor parseTensor(const JsonValue &v, const FunctionSpec &f,
                       const std::string &what, Checker &c) {
  Tensor t;
  if (v.kind() != JsonValue::Kind::Object) {
    c.fail(what + " is not an object");
    return t;
  }
  std::string dtype = v.getString(key::kDtype) ? *v.getString(key::kDtype) : "";
  t.global = intList(v.getArray(key::kGlobalShape), what + "." + key::kGlobalShape, c);
  t.local = intList(v.getArray(key::kLocalShape), what + "." + key::kLocalShape, c);
  const JsonValue *sh = v.getObject(key::kSharding);
  if (!sh)
    c.fail(what + " has no sharding");
  else
    parseSharding(*sh, f, t, c);
  if (const std::string *init = v.getString(key::kInit))
    t.init = *init;
  if (const JsonValue *rv = v.get(key::kRole)) {
    const std::string *role = rv->string();
    if (!role || (*role != key::kRoleLossScale &&
                  *role != key::kRoleErrorFeedback &&
                  *role != key::kRoleCompressionStep &&
                  *role != key::kRoleTokens && *role != key::kRoleTargets))
      c.fail(what + " has an unknown role " +
             (role ? "'" + *role + "'" : std::string("(not a string)")) +
             " (expected '" + key::kRoleLossScale + "', '" +
             key::kRoleErrorFeedback + "' or '" + key::kRoleCompressionStep +
             "') for state, '" + key::kRoleTokens + "' or '" +
             key::kRoleTargets + "' for data");
    else
      t.role = *role;
  }
  parseFrontendKeys(v, what, t, c);
  // A slice lies in the tensor's dimensions; an extent (padding past the
  // fused tensor's end) inside the slice.
  if (!t.sliceOf.empty() &&
      (t.sliceDim >= (int64_t)t.global.size() ||
       (t.sliceExtent &&
        t.sliceExtent >= t.sliceOffset + t.global[t.sliceDim])))
    c.fail(what + " has a slice outside its global shape (dimension " +
           std::to_string(t.sliceDim) + ", offset " +
           std::to_string(t.sliceOffset) + ", extent " +
           std::to_string(t.sliceExtent) + ")");
  if (t.dims.size() != t.global.size() ||
      t.local.size() != t.global.size())
    c.fail(what + " has inconsistent ranks");
  par_dtype_t type;
  if (par_dtype_from_name(dtype.c_str(), &type) == PAR_OK)
    t.setDtype(type);
  else
    c.fail(what + " has element type '" + dtype +
           "', which the session does not support (" + dtypeList() + ")");
  for (int64_t d : t.global)
    t.globalCount *= d;
  for (int64_t d : t.local)
    t.localCount *= d;
  return t;
}

void parseMesh(const JsonValue &fv, FunctionSpec &spec, Checker &c) {
  const JsonValue *mesh = fv.getObject(key::kMesh);
  const std::vector<JsonValue> *axes = mesh ? mesh->getArray(key::kAxes) : nullptr;
  if (!axes)
    return;
  for (const JsonValue &a : *axes) {
    const std::string *name = a.getString(key::kName);
    int64_t size = a.getInteger(key::kSize).value_or(1);
    if (size < 1)
      c.fail("bad mesh axis size in '" + spec.name + "'");
    spec.axisNames.push_back(name ? *name : "");
    spec.sizes.push_back(size);
  }
}

void parseTrainMetadata(const JsonValue &fv, FunctionSpec &spec, Checker &c) {
  const std::string &name = spec.name;
  // (result, argument) pairs: fed back after a step, or donated (the
  // result written into the argument's buffer; each side at most once and
  // the same bytes, or the runtime's in-place call would overrun).
  auto pairs = [&](const char *k, const char *what, bool donated,
                   std::vector<int64_t> &out) {
    const std::vector<JsonValue> *list = fv.getArray(k);
    if (!list)
      return true;
    std::set<int64_t> results, args;
    for (const JsonValue &pv : *list) {
      const std::vector<JsonValue> *pair = pv.array();
      if (!pair || pair->size() != 2 || !(*pair)[0].integer() ||
          !(*pair)[1].integer()) {
        c.fail(std::string("bad ") + what + " pair in '" + name + "'");
        return false;
      }
      int64_t r = *(*pair)[0].integer(), a = *(*pair)[1].integer();
      if (r < 0 || a < 0 || r >= (int64_t)spec.outputs.size() ||
          a >= (int64_t)spec.inputs.size()) {
        c.fail(std::string(what) + " pair out of range in '" + name + "'");
        return false;
      }
      if (donated &&
          (!results.insert(r).second || !args.insert(a).second ||
           spec.outputs[r].localCount != spec.inputs[a].localCount ||
           spec.outputs[r].dtype != spec.inputs[a].dtype)) {
        c.fail("donated pair (" + std::to_string(r) + ", " +
               std::to_string(a) + ") in '" + name +
               "' repeats a side or pairs different sizes");
        return false;
      }
      out.push_back(r);
      out.push_back(a);
    }
    return true;
  };
  if (!pairs(key::kFeedback, "feedback", false, spec.feedback) ||
      !pairs(key::kDonated, "donated", true, spec.donated))
    return;
  if (const JsonValue *m = fv.get(key::kMicroBatches)) {
    if (!m->integer() || *m->integer() < 1)
      c.fail("bad micro_batches in '" + name + "'");
    else
      spec.microBatches = *m->integer();
  }
  if (std::optional<int64_t> k = fv.getInteger(key::kStage))
    spec.stage = *k;
  if (const std::vector<JsonValue> *idx = fv.getArray(key::kStageArgs))
    for (const JsonValue &v : *idx) {
      std::optional<int64_t> i = v.integer();
      if (!i || *i < 0) {
        c.fail("bad stage_args in '" + name + "'");
        return;
      }
      spec.stageArgs.push_back(*i);
    }
  if (const std::string *t = fv.getString(key::kComputeType)) {
    if (*t != "f16" && *t != "bf16")
      c.fail("bad compute_type '" + *t + "' in '" + name + "'");
    spec.computeType = *t;
  }
  if (const JsonValue *ls = fv.getObject(key::kLossScale)) {
    std::optional<int64_t> s = ls->getInteger(key::kLossScaleScale);
    std::optional<int64_t> f = ls->getInteger(key::kLossScaleFinite);
    if (!s || !f || *s < 0 || *f < 0 || *s >= (int64_t)spec.outputs.size() ||
        *f >= (int64_t)spec.outputs.size())
      c.fail("bad loss_scale in '" + name + "'");
    else {
      spec.lossScaleResult = *s;
      spec.finiteResult = *f;
      if (const JsonValue *m = ls->get(key::kLossScaleMin))
        if (std::optional<double> v = m->number())
          spec.minLossScale = *v;
    }
  }
  if (const JsonValue *cv = fv.get(key::kCompression)) {
    const std::string *method =
        cv->kind() == JsonValue::Kind::Object
            ? cv->getString(key::kCompressionMethod)
            : nullptr;
    const JsonValue *cb = method ? cv->get(key::kCompressedBytes) : nullptr;
    const JsonValue *ub = method ? cv->get(key::kUncompressedBytes) : nullptr;
    std::optional<double> compressed = cb ? cb->number() : std::nullopt;
    std::optional<double> uncompressed = ub ? ub->number() : std::nullopt;
    if (!method || method->empty() || !compressed || !uncompressed ||
        *compressed < 0 || *uncompressed < 0)
      c.fail("bad compression in '" + name + "' (expected {" +
             key::kCompressionMethod + ": a name, " + key::kCompressedBytes +
             ", " + key::kUncompressedBytes + ": bytes >= 0})");
    else {
      spec.compressionMethod = *method;
      spec.compressedBytes = *compressed;
      spec.uncompressedBytes = *uncompressed;
    }
  }
  if (const JsonValue *mv = fv.getObject(key::kMemory)) {
    std::optional<int64_t> peak = mv->getInteger(key::kMemoryPeak);
    if (!peak || *peak < 0)
      c.fail("bad memory plan in '" + name + "' (no peak)");
    else {
      spec.memoryPeak = *peak;
      spec.memoryArguments = mv->getInteger(key::kMemoryArguments).value_or(0);
      spec.memoryResults = mv->getInteger(key::kMemoryResults).value_or(0);
      spec.memoryProgramPeak =
          mv->getInteger(key::kMemoryProgramPeak).value_or(0);
      if (const JsonValue *parts = mv->getObject(key::kMemoryAtPeak))
        for (const auto &[kind, v] : *parts->object())
          spec.memoryAtPeak[kind] = v.integer().value_or(0);
      if (const JsonValue *types = mv->getObject(key::kMemoryAllocations))
        for (const auto &[bytes, v] : *types->object())
          if (const std::string *t = v.string())
            spec.memoryTypes[strtoll(bytes.c_str(), nullptr, 10)] = *t;
    }
  }
  if (const JsonValue *roles = fv.getObject(key::kRoles))
    for (auto [role, dst] : {std::pair<const char *, std::string *>{
                                 key::kRoleGrad, &spec.grad},
                             {key::kRoleStep, &spec.step},
                             {key::kRoleUpdate, &spec.update},
                             {key::kRoleLogits, &spec.logits}})
      if (const std::string *s = roles->getString(role))
        *dst = *s;
}

FunctionSpec parseFunction(const JsonValue &fv) {
  FunctionSpec spec;
  spec.name = fv.getString(key::kName) ? *fv.getString(key::kName) : "";
  Checker c{spec.error};
  parseMesh(fv, spec, c);
  int k = 0;
  if (const std::vector<JsonValue> *in = fv.getArray(key::kInputs))
    for (const JsonValue &t : *in)
      spec.inputs.push_back(
          parseTensor(t, spec, "arg" + std::to_string(k++), c));
  k = 0;
  if (const std::vector<JsonValue> *out = fv.getArray(key::kOutputs))
    for (const JsonValue &t : *out)
      spec.outputs.push_back(
          parseTensor(t, spec, "result" + std::to_string(k++), c));
  parseTrainMetadata(fv, spec, c);
  return spec;
}

/// One action object of a program; false if malformed.
bool parseAction(const JsonValue &v, par_pipeline_action_t &a) {
  const std::string *op = v.getString(key::kActionOp);
  std::optional<int64_t> mb = v.getInteger(key::kActionMb),
                         stage = v.getInteger(key::kActionStage);
  if (!op || !mb || !stage || *mb < 0 || *stage < 0)
    return false;
  int code = 0;
  while (code < kNumActionOps && *op != kActionOps[code])
    ++code;
  if (code == kNumActionOps)
    return false;
  a.op = static_cast<par_pipeline_op_t>(code);
  a.mb = *mb;
  a.stage = *stage;
  bool transfer = a.op >= PAR_PIPELINE_SEND_ACT;
  std::optional<int64_t> peer = v.getInteger(key::kActionPeer);
  if (transfer != peer.has_value() || (peer && *peer < 0))
    return false;
  a.peer = peer ? *peer : -1;
  return true;
}

void parsePipeline(const JsonValue &pipe, PipelineSpec &p) {
  p.present = true;
  auto str = [&](const char *key, std::string &dst, bool &has) {
    if (const std::string *s = pipe.getString(key)) {
      dst = *s;
      has = true;
    }
  };
  bool ignored;
  str(key::kPipelineFunc, p.func, p.hasFunc);
  str(key::kPipelineStep, p.step, ignored);
  str(key::kPipelineLogits, p.logits, ignored);
  str(key::kPipelineAxis, p.axis, p.hasAxis);
  str(key::kPipelineSchedule, p.schedule, p.hasSchedule);
  str(key::kPipelineBackward, p.backward, p.hasBackward);
  p.p = pipe.getInteger(key::kPipelineP).value_or(0);
  p.m = pipe.getInteger(key::kPipelineM).value_or(0);
  p.v = pipe.getInteger(key::kPipelineV).value_or(0);
  const std::vector<JsonValue> *stages = pipe.getArray(key::kPipelineStages);
  const std::vector<JsonValue> *programs =
      pipe.getArray(key::kPipelinePrograms);
  if (!stages || !programs) {
    p.present = false; // not a usable pipeline section
    return;
  }
  for (const JsonValue &sv : *stages) {
    StageSpec st;
    for (auto [role, dst] : {std::pair<const char *, std::string *>{
                                 key::kStageForward, &st.forward},
                             {key::kStageBackward, &st.backward},
                             {key::kStageInputGrad, &st.inputGrad},
                             {key::kStageWeightGrad, &st.weightGrad},
                             {key::kStageUpdate, &st.update},
                             {key::kStageStashForward, &st.stashForward},
                             {key::kStageStashBackward, &st.stashBackward},
                             {key::kStageStashInputGrad, &st.stashInputGrad},
                             {key::kStageStashWeightGrad,
                              &st.stashWeightGrad}})
      if (const std::string *s = sv.getString(role))
        *dst = *s;
    p.stages.push_back(st);
  }
  for (const JsonValue &prog : *programs) {
    const std::vector<JsonValue> *actions = prog.array();
    if (!actions) {
      p.error = "manifest: each pipeline program must be a list of actions";
      return;
    }
    p.programs.emplace_back();
    for (const JsonValue &av : *actions) {
      par_pipeline_action_t a;
      if (!parseAction(av, a)) {
        p.error = "manifest: malformed action in the program of pipeline "
                  "rank " +
                  std::to_string(p.programs.size() - 1) +
                  " (expected {op, mb, stage[, peer]})";
        return;
      }
      p.programs.back().push_back(a);
    }
  }
}

bool readFile(const std::string &path, std::string &text, std::string &error) {
  FILE *f = fopen(path.c_str(), "rb");
  if (!f) {
    error = "cannot read manifest '" + path + "': " + strerror(errno);
    return false;
  }
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
    text.append(buf, n);
  bool ok = !ferror(f);
  fclose(f);
  if (!ok)
    error = "cannot read manifest '" + path + "': " + strerror(errno);
  return ok;
}

/// Refuses a manifest written for another schema version (or none).
bool checkVersion(const JsonValue &root, const std::string &path,
                  std::string &error) {
  std::string reads = "this runtime reads version " + std::to_string(kVersion);
  const JsonValue *v = root.get(key::kVersion);
  if (!v || !v->integer()) {
    error = "manifest '" + path + "' has no schema version (" + reads +
            "); rebuild the artifact with par-compile";
    return false;
  }
  if (*v->integer() != kVersion) {
    error = "manifest '" + path + "' has schema version " +
            std::to_string(*v->integer()) + ", but " + reads +
            "; rebuild the artifact with par-compile";
    return false;
  }
  return true;
}

} // namespace

bool readManifest(const std::string &path, Manifest &out, std::string &error) {
  std::string text, jsonError;
  if (!readFile(path, text, error))
    return false;
  std::optional<JsonValue> root = JsonValue::parse(text, jsonError);
  if (!root) {
    error = "manifest '" + path + "' is not valid JSON: " + jsonError;
    return false;
  }
  if (!checkVersion(*root, path, error))
    return false;
  if (const JsonValue *t = root->get(key::kTarget)) {
    const std::string *name = t->string();
    if (!name || !(*name == "cpu" || *name == "cuda" ||
                   name->rfind("cuda:", 0) == 0)) {
      error = "manifest '" + path + "' has an unknown target" +
              (name ? " '" + *name + "'" : std::string()) +
              " (this runtime runs \"cpu\" and \"cuda[:<chip>]\" programs)";
      return false;
    }
    out.target = *name;
  }
  const std::vector<JsonValue> *fns = root->getArray(key::kFunctions);
  if (fns)
    for (const JsonValue &fv : *fns)
      if (fv.kind() == JsonValue::Kind::Object)
        out.functions.push_back(parseFunction(fv));
  if (out.functions.empty()) {
    error = "manifest '" + path + "' lists no functions";
    return false;
  }
  if (const JsonValue *pipe = root->getObject(key::kPipeline))
    parsePipeline(*pipe, out.pipeline);
  return true;
}

} // namespace par::manifest

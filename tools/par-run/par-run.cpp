//===- par-run.cpp - Runs a compiled par program on N ranks ---------------===//
//
// par-run -n N ARTIFACT [--backend cpu|cuda] [--input NAME=FILE.npy ...]
//         [--seed S] [--output DIR] [--verify] [--entry NAME]
//
// Outside an MPI job, par-run checks N against the artifact's mesh and
// re-launches itself through `mpirun -n N` (the existing launcher; inside an
// mpirun or srun job started by the user it runs directly). Each rank then
// builds its local block of every input — from the counter-based generator
// (seed, tensor, global element index), so every sharding sees the same
// global values, or from a given .npy — calls the compiled entry point,
// and rank 0 gathers the outputs, writes them as .npy, and prints per-rank
// time and bytes. With --verify rank 0 also runs the unsharded reference on
// the same global inputs and compares.
//
//===----------------------------------------------------------------------===//

#include "par/Pipeline/Schedule.h"
#include "par/Runtime/par_runtime.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <csignal>
#include <dlfcn.h>
#include <ftw.h>
#include <functional>
#include <list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

[[noreturn]] void fail(const std::string &msg) {
  fprintf(stderr, "par-run: error: %s\n", msg.c_str());
  fflush(stderr);
  exit(1);
}

//===----------------------------------------------------------------------===//
// Options
//===----------------------------------------------------------------------===//

struct Options {
  int64_t ranks = -1;
  std::string artifact;
  std::string backend = "cpu";
  std::map<std::string, std::string> inputs;
  uint64_t seed = 0;
  std::string outputDir;
  std::string entry;
  bool verify = false;
  int64_t repeat = 1;
  int64_t steps = 0;
  std::string lossCsv;
  std::string lossPlot;   // --loss-plot: an SVG of the loss per step
  int64_t sample = 0;     // --sample N: characters to sample after training
  std::string prompt = "\n";
  double temperature = 0.8;
  std::string sampleEntry;
  bool pipeline = false;  // --pipeline: run par-pipeline-schedule's programs
  std::string trace;      // --trace FILE.json: Chrome trace (--pipeline)
  std::string data;
  int64_t tokensArg = 0, targetsArg = 1;
  double rtol = -1; // --rtol: overrides the per-dtype verify tolerance
};

void usage() {
  fprintf(stderr,
          "usage: par-run -n N ARTIFACT_DIR [--backend cpu|cuda] "
          "[--input argK=FILE.npy ...] [--seed S] [--output DIR] [--verify] "
          "[--entry NAME] [--repeat K] [--steps N [--loss-csv FILE]]\n"
          "  --data FILE character-level corpus: each run/step fills the token "
          "and\n             target arguments (--tokens argK, --targets argJ; "
          "default arg0,\n             arg1, i64 [batch, seq]) with random "
          "windows of FILE\n"
          "  --rtol X    verify tolerance (relative to the reference's largest "
          "magnitude);\n             default 1e-5 for f32, 1e-12 for f64\n"
          "  --steps N   train: run a train step (par-optimizer) N times, "
          "feeding\n             new parameters and state back, printing the "
          "loss\n"
          "  --repeat K  run the program K times (after one warm-up run when "
          "K > 1)\n             and report the best and median time\n"
          "  --loss-plot FILE.svg  with --steps: plot the loss per step\n"
          "  --sample N  after training, sample N characters from the model "
          "with\n             the logits entry (--sample-entry NAME, default "
          "the step's\n             name with _step -> _logits), from "
          "--prompt TEXT (default\n             a newline) at --temperature "
          "T (default 0.8; 0: greedy)\n"
          "  --pipeline  train a pipelined program (par-pipeline-split and\n"
          "             par-pipeline-schedule): each rank runs its stored "
          "actions;\n             with --verify the loss trajectory is "
          "checked against the\n             unpipelined train step on 1 "
          "rank\n"
          "  --trace FILE.json  with --pipeline: a Chrome trace of every "
          "rank's\n             actions (open in Perfetto)\n");
}

Options parseArgs(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc)
        fail("option " + a + " needs a value");
      return argv[++i];
    };
    if (a == "-n" || a == "--ranks") {
      std::string v = next();
      char *end = nullptr;
      o.ranks = strtoll(v.c_str(), &end, 10);
      if (*end || o.ranks <= 0)
        fail("-n needs a positive number of ranks, got '" + v + "'");
    } else if (a == "--backend") {
      o.backend = next();
      if (o.backend != "cpu" && o.backend != "cuda")
        fail("unknown backend '" + o.backend + "' (expected cpu or cuda)");
    } else if (a == "--input") {
      std::string v = next();
      size_t eq = v.find('=');
      if (eq == std::string::npos)
        fail("--input needs NAME=FILE.npy, got '" + v + "'");
      o.inputs[v.substr(0, eq)] = v.substr(eq + 1);
    } else if (a == "--seed") {
      o.seed = strtoull(next().c_str(), nullptr, 10);
    } else if (a == "--output") {
      o.outputDir = next();
    } else if (a == "--entry") {
      o.entry = next();
    } else if (a == "--repeat") {
      std::string v = next();
      char *end = nullptr;
      o.repeat = strtoll(v.c_str(), &end, 10);
      if (*end || o.repeat <= 0)
        fail("--repeat needs a positive count, got '" + v + "'");
    } else if (a == "--steps") {
      std::string v = next();
      char *end = nullptr;
      o.steps = strtoll(v.c_str(), &end, 10);
      if (*end || o.steps <= 0)
        fail("--steps needs a positive count, got '" + v + "'");
    } else if (a == "--data") {
      o.data = next();
    } else if (a == "--tokens") {
      std::string v = next();
      if (v.rfind("arg", 0) != 0)
        fail("--tokens needs argK, got '" + v + "'");
      o.tokensArg = strtoll(v.c_str() + 3, nullptr, 10);
    } else if (a == "--targets") {
      std::string v = next();
      if (v.rfind("arg", 0) != 0)
        fail("--targets needs argK, got '" + v + "'");
      o.targetsArg = strtoll(v.c_str() + 3, nullptr, 10);
    } else if (a == "--rtol") {
      std::string v = next();
      char *end = nullptr;
      o.rtol = strtod(v.c_str(), &end);
      if (*end || !(o.rtol >= 0))
        fail("--rtol needs a non-negative number, got '" + v + "'");
    } else if (a == "--loss-csv") {
      o.lossCsv = next();
    } else if (a == "--loss-plot") {
      o.lossPlot = next();
    } else if (a == "--sample") {
      std::string v = next();
      o.sample = strtoll(v.c_str(), nullptr, 10);
      if (o.sample <= 0)
        fail("--sample needs a positive count, got '" + v + "'");
    } else if (a == "--prompt") {
      o.prompt = next();
      if (o.prompt.empty())
        fail("--prompt needs at least one character");
    } else if (a == "--temperature") {
      std::string v = next();
      char *end = nullptr;
      o.temperature = strtod(v.c_str(), &end);
      if (v.empty() || *end || !(o.temperature >= 0))
        fail("--temperature needs a number >= 0, got '" + v + "'");
    } else if (a == "--sample-entry") {
      o.sampleEntry = next();
    } else if (a == "--pipeline") {
      o.pipeline = true;
    } else if (a == "--trace") {
      o.trace = next();
    } else if (a == "--verify") {
      o.verify = true;
    } else if (a == "-h" || a == "--help") {
      usage();
      exit(0);
    } else if (!a.empty() && a[0] == '-') {
      usage();
      fail("unknown option '" + a + "'");
    } else if (o.artifact.empty()) {
      o.artifact = a;
    } else {
      fail("more than one artifact given ('" + o.artifact + "', '" + a + "')");
    }
  }
  if (o.artifact.empty()) {
    usage();
    fail("no artifact given");
  }
  if (o.ranks < 0)
    fail("-n N is required");
  if (o.steps > 0 && o.repeat > 1)
    fail("--steps and --repeat cannot be combined");
  if (!o.lossCsv.empty() && o.steps == 0)
    fail("--loss-csv needs --steps");
  if (!o.lossPlot.empty() && o.steps == 0)
    fail("--loss-plot needs --steps");
  if (o.pipeline && (o.steps == 0 || !o.entry.empty() || !o.inputs.empty()))
    fail("--pipeline trains: it needs --steps, and takes neither --entry nor "
         "--input");
  if (!o.trace.empty() && !o.pipeline)
    fail("--trace needs --pipeline");
  if (o.sample > 0 && (o.steps == 0 || o.data.empty()))
    fail("--sample needs --steps and --data (it samples from the trained "
         "model with the data's character tokenizer)");
  return o;
}

//===----------------------------------------------------------------------===//
// Manifest
//===----------------------------------------------------------------------===//

struct TensorSpec {
  std::string dtype;
  std::vector<int64_t> global, local;
  std::vector<std::vector<std::string>> dims;
  std::vector<std::string> partial;
  std::string partialKind;
  std::string init; // "", "zeros", "ones" or "uniform:<scale>"
  int64_t elementSize() const {
    if (dtype == "f32" || dtype == "i32")
      return 4;
    if (dtype == "f64" || dtype == "i64")
      return 8;
    return 0;
  }
  int64_t localCount() const {
    int64_t n = 1;
    for (int64_t d : local)
      n *= d;
    return n;
  }
  int64_t globalCount() const {
    int64_t n = 1;
    for (int64_t d : global)
      n *= d;
    return n;
  }
};

struct FunctionSpec {
  std::string name;
  std::vector<std::string> axisNames;
  std::vector<int64_t> axisSizes;
  std::vector<TensorSpec> inputs, outputs;
  /// (result, argument): after a train step the result feeds the argument.
  std::vector<std::pair<size_t, size_t>> feedback;
  /// Micro-batches a train step accumulates gradients over (1: none).
  int64_t microBatches = 1;
  /// Pipeline stage functions: the stage, and for each leading argument the
  /// split function's argument it stands for.
  int64_t stage = -1;
  std::vector<int64_t> stageArgs;
  int64_t devices() const {
    int64_t n = 1;
    for (int64_t s : axisSizes)
      n *= s;
    return n;
  }
  int64_t axisIndex(const std::string &name) const {
    for (size_t i = 0; i < axisNames.size(); ++i)
      if (axisNames[i] == name)
        return i;
    return -1;
  }
};

std::vector<int64_t> intList(const llvm::json::Array *a, const std::string &what) {
  if (!a)
    fail("manifest: missing " + what);
  std::vector<int64_t> out;
  for (const llvm::json::Value &v : *a) {
    auto i = v.getAsInteger();
    if (!i)
      fail("manifest: " + what + " must hold integers");
    out.push_back(*i);
  }
  return out;
}

TensorSpec parseTensor(const llvm::json::Value &v, const std::string &what) {
  const llvm::json::Object *o = v.getAsObject();
  if (!o)
    fail("manifest: " + what + " is not an object");
  TensorSpec t;
  if (auto s = o->getString("dtype"))
    t.dtype = s->str();
  t.global = intList(o->getArray("global_shape"), what + ".global_shape");
  t.local = intList(o->getArray("local_shape"), what + ".local_shape");
  const llvm::json::Object *sh = o->getObject("sharding");
  if (!sh)
    fail("manifest: " + what + " has no sharding");
  if (const llvm::json::Array *dims = sh->getArray("dims"))
    for (const llvm::json::Value &d : *dims) {
      std::vector<std::string> axes;
      if (const llvm::json::Array *a = d.getAsArray())
        for (const llvm::json::Value &x : *a)
          if (auto s = x.getAsString())
            axes.push_back(s->str());
      t.dims.push_back(axes);
    }
  if (const llvm::json::Array *p = sh->getArray("partial"))
    for (const llvm::json::Value &x : *p)
      if (auto s = x.getAsString())
        t.partial.push_back(s->str());
  if (auto k = sh->getString("partial_kind"))
    t.partialKind = k->str();
  if (auto init = o->getString("init"))
    t.init = init->str();
  if (t.dims.size() != t.global.size() || t.local.size() != t.global.size())
    fail("manifest: " + what + " has inconsistent ranks");
  if (t.elementSize() == 0)
    fail("manifest: " + what + " has element type '" + t.dtype +
         "', which par-run does not support yet (f32, f64, i32, i64)");
  return t;
}

FunctionSpec loadManifest(const std::string &path, const std::string &entry) {
  auto buf = llvm::MemoryBuffer::getFile(path);
  if (!buf)
    fail("cannot read manifest '" + path + "': " + buf.getError().message());
  llvm::Expected<llvm::json::Value> json = llvm::json::parse((*buf)->getBuffer());
  if (!json)
    fail("manifest '" + path + "' is not valid JSON: " +
         llvm::toString(json.takeError()));
  const llvm::json::Object *root = json->getAsObject();
  const llvm::json::Array *fns = root ? root->getArray("functions") : nullptr;
  if (!fns || fns->empty())
    fail("manifest '" + path + "' lists no functions");
  for (const llvm::json::Value &fv : *fns) {
    const llvm::json::Object *f = fv.getAsObject();
    if (!f)
      continue;
    std::string name = f->getString("name").value_or("").str();
    if (!entry.empty() && name != entry)
      continue;
    FunctionSpec spec;
    spec.name = name;
    if (const llvm::json::Object *mesh = f->getObject("mesh"))
      if (const llvm::json::Array *axes = mesh->getArray("axes"))
        for (const llvm::json::Value &a : *axes) {
          const llvm::json::Object *ao = a.getAsObject();
          spec.axisNames.push_back(ao->getString("name").value_or("").str());
          spec.axisSizes.push_back(ao->getInteger("size").value_or(1));
        }
    int k = 0;
    if (const llvm::json::Array *in = f->getArray("inputs"))
      for (const llvm::json::Value &t : *in)
        spec.inputs.push_back(parseTensor(t, "arg" + std::to_string(k++)));
    k = 0;
    if (const llvm::json::Array *out = f->getArray("outputs"))
      for (const llvm::json::Value &t : *out)
        spec.outputs.push_back(parseTensor(t, "result" + std::to_string(k++)));
    if (const llvm::json::Array *fb = f->getArray("feedback"))
      for (const llvm::json::Value &pv : *fb) {
        const llvm::json::Array *pair = pv.getAsArray();
        if (!pair || pair->size() != 2 || !(*pair)[0].getAsInteger() ||
            !(*pair)[1].getAsInteger())
          fail("manifest: bad feedback pair in '" + name + "'");
        size_t r = *(*pair)[0].getAsInteger(), a = *(*pair)[1].getAsInteger();
        if (r >= spec.outputs.size() || a >= spec.inputs.size())
          fail("manifest: feedback pair out of range in '" + name + "'");
        spec.feedback.push_back({r, a});
      }
    if (std::optional<int64_t> m = f->getInteger("micro_batches")) {
      if (*m < 1)
        fail("manifest: bad micro_batches in '" + name + "'");
      spec.microBatches = *m;
    }
    if (std::optional<int64_t> k = f->getInteger("stage"))
      spec.stage = *k;
    if (const llvm::json::Array *idx = f->getArray("stage_args"))
      for (const llvm::json::Value &v : *idx) {
        std::optional<int64_t> i = v.getAsInteger();
        if (!i || *i < 0)
          fail("manifest: bad stage_args in '" + name + "'");
        spec.stageArgs.push_back(*i);
      }
    return spec;
  }
  fail("manifest '" + path + "' has no function named '" + entry + "'");
}

//===----------------------------------------------------------------------===//
// Layout: which block of a global tensor a rank holds
//===----------------------------------------------------------------------===//

std::vector<int64_t> coordsOf(const FunctionSpec &f, int64_t rank) {
  std::vector<int64_t> c(f.axisSizes.size());
  for (int64_t i = (int64_t)c.size() - 1; i >= 0; --i) {
    c[i] = rank % f.axisSizes[i];
    rank /= f.axisSizes[i];
  }
  return c;
}

/// Per-dimension offset of `rank`'s block.
std::vector<int64_t> blockOffset(const FunctionSpec &f, const TensorSpec &t,
                                 const std::vector<int64_t> &coords) {
  std::vector<int64_t> off(t.global.size(), 0);
  for (size_t d = 0; d < t.dims.size(); ++d) {
    int64_t block = 0;
    for (const std::string &a : t.dims[d]) {
      int64_t i = f.axisIndex(a);
      if (i < 0)
        fail("manifest: unknown mesh axis '" + a + "'");
      block = block * f.axisSizes[i] + coords[i];
    }
    off[d] = block * t.local[d];
  }
  return off;
}

/// Calls fn(localLinear, globalLinear) for every element of the block.
template <typename Fn>
void forEachElement(const TensorSpec &t, const std::vector<int64_t> &offset,
                    Fn fn) {
  size_t rank = t.local.size();
  std::vector<int64_t> idx(rank, 0);
  int64_t count = t.localCount();
  for (int64_t l = 0; l < count; ++l) {
    int64_t g = 0;
    for (size_t d = 0; d < rank; ++d)
      g = g * t.global[d] + offset[d] + idx[d];
    fn(l, g);
    for (int64_t d = (int64_t)rank - 1; d >= 0; --d) {
      if (++idx[d] < t.local[d])
        break;
      idx[d] = 0;
    }
  }
}

//===----------------------------------------------------------------------===//
// Values: generator and .npy
//===----------------------------------------------------------------------===//

/// Counter-based generator: a value depends only on (seed, tensor, global
/// element index), never on the layout.
double generate(uint64_t seed, uint64_t tensor, uint64_t index) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + (tensor + 1) * 0xBF58476D1CE4E5B9ull +
               index * 0x94D049BB133111EBull;
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return (double)(x >> 40) / (double)(1ull << 24) * 2.0 - 1.0; // [-1, 1)
}

/// The generated value of element `index` of input `tensor`: uniform in
/// [-1, 1) for floats, small integers in [-8, 8) for integers.
double generateFor(const TensorSpec &t, uint64_t seed, uint64_t tensor,
                   uint64_t index) {
  // The program's own initialiser (par.init), if it names one.
  if (t.init == "zeros")
    return 0.0;
  if (t.init == "ones")
    return 1.0;
  if (t.init.rfind("uniform:", 0) == 0)
    return generate(seed, tensor, index) * strtod(t.init.c_str() + 8, nullptr);
  double v = generate(seed, tensor, index);
  return t.dtype[0] == 'i' ? std::floor(v * 8) : v;
}

void storeValue(const TensorSpec &t, char *base, int64_t i, double v) {
  if (t.dtype == "f32")
    ((float *)base)[i] = (float)v;
  else if (t.dtype == "f64")
    ((double *)base)[i] = v;
  else if (t.dtype == "i32")
    ((int32_t *)base)[i] = (int32_t)std::llround(v);
  else
    ((int64_t *)base)[i] = (int64_t)std::llround(v);
}

double loadValue(const TensorSpec &t, const char *base, int64_t i) {
  if (t.dtype == "f32")
    return ((const float *)base)[i];
  if (t.dtype == "f64")
    return ((const double *)base)[i];
  if (t.dtype == "i32")
    return ((const int32_t *)base)[i];
  return (double)((const int64_t *)base)[i];
}

std::string npyDescr(const std::string &dtype) {
  if (dtype == "f32")
    return "<f4";
  if (dtype == "f64")
    return "<f8";
  if (dtype == "i32")
    return "<i4";
  return "<i8";
}

void writeNpy(const std::string &path, const TensorSpec &t, const char *data) {
  std::string shape;
  for (int64_t d : t.global)
    shape += std::to_string(d) + ", ";
  // numpy's tuples: "(8,)" for one dim, "(8, 16)" for more, "()" for none.
  if (t.global.size() > 1)
    shape.resize(shape.size() - 2);
  else if (t.global.size() == 1)
    shape.resize(shape.size() - 1);
  std::string header = "{'descr': '" + npyDescr(t.dtype) +
                       "', 'fortran_order': False, 'shape': (" + shape + "), }";
  size_t total = 10 + header.size() + 1;
  header += std::string((64 - total % 64) % 64, ' ') + "\n";
  FILE *f = fopen(path.c_str(), "wb");
  if (!f)
    fail("cannot write '" + path + "': " + strerror(errno));
  const char magic[] = "\x93NUMPY\x01\x00";
  fwrite(magic, 1, 8, f);
  uint16_t len = header.size();
  fwrite(&len, 2, 1, f);
  fwrite(header.data(), 1, header.size(), f);
  fwrite(data, t.elementSize(), t.globalCount(), f);
  fclose(f);
}

/// Reads a .npy file holding exactly `t`'s global tensor.
std::vector<char> readNpy(const std::string &path, const TensorSpec &t,
                          const std::string &name) {
  FILE *f = fopen(path.c_str(), "rb");
  if (!f)
    fail("cannot open input '" + name + "' file '" + path + "': " +
         strerror(errno));
  char magic[8];
  uint16_t len = 0;
  if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "\x93NUMPY", 6) != 0 ||
      fread(&len, 2, 1, f) != 1) {
    fclose(f);
    fail("input '" + name + "': '" + path + "' is not a .npy file");
  }
  std::string header(len, '\0');
  if (fread(header.data(), 1, len, f) != len) {
    fclose(f);
    fail("input '" + name + "': truncated header in '" + path + "'");
  }
  std::string expect = npyDescr(t.dtype);
  if (header.find("'" + expect + "'") == std::string::npos) {
    fclose(f);
    fail("input '" + name + "': '" + path + "' does not hold " + t.dtype +
         " (" + expect + ") data: " + header);
  }
  if (header.find("'fortran_order': True") != std::string::npos) {
    fclose(f);
    fail("input '" + name + "': Fortran-ordered arrays are not supported");
  }
  size_t open = header.find("'shape': (");
  size_t close = header.find(')', open);
  std::vector<int64_t> shape;
  if (open != std::string::npos && close != std::string::npos) {
    std::string s = header.substr(open + 10, close - open - 10);
    for (size_t p = 0; p < s.size();) {
      while (p < s.size() && (s[p] == ' ' || s[p] == ','))
        ++p;
      if (p >= s.size())
        break;
      shape.push_back(strtoll(s.c_str() + p, nullptr, 10));
      while (p < s.size() && s[p] != ',')
        ++p;
    }
  }
  if (shape != t.global) {
    std::string want, got;
    for (int64_t d : t.global)
      want += std::to_string(d) + "x";
    for (int64_t d : shape)
      got += std::to_string(d) + "x";
    fclose(f);
    fail("input '" + name + "': '" + path + "' has shape " + got +
         " but the program expects " + want);
  }
  std::vector<char> data(t.globalCount() * t.elementSize());
  if (fread(data.data(), 1, data.size(), f) != data.size()) {
    fclose(f);
    fail("input '" + name + "': '" + path + "' is shorter than its shape");
  }
  fclose(f);
  return data;
}

//===----------------------------------------------------------------------===//
// Calling a compiled entry point
//===----------------------------------------------------------------------===//

/// A memref descriptor: {alloc, aligned, offset, sizes[r], strides[r]}.
std::vector<int64_t> descriptor(void *data, const std::vector<int64_t> &shape) {
  std::vector<int64_t> d;
  d.push_back((int64_t)(intptr_t)data);
  d.push_back((int64_t)(intptr_t)data);
  d.push_back(0);
  for (int64_t s : shape)
    d.push_back(s);
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = (int64_t)shape.size() - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  for (int64_t s : strides)
    d.push_back(s);
  return d;
}

struct Program {
  void *handle = nullptr;
  void (*entry)(void **) = nullptr;
};

Program loadProgram(const std::string &so, const std::string &name) {
  Program p;
  p.handle = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!p.handle)
    fail("cannot load program '" + so + "': " + dlerror());
  std::string sym = "par_packed_" + name;
  p.entry = (void (*)(void **))dlsym(p.handle, sym.c_str());
  if (!p.entry)
    fail("program '" + so + "' has no entry point '" + sym + "'");
  return p;
}

/// Runs `p` on local inputs; returns one malloc'ed buffer per output (the
/// caller frees them).
std::vector<char *> call(const Program &p, const FunctionSpec &f,
                         std::vector<std::vector<char>> &inputs,
                         bool useLocal) {
  std::vector<std::vector<int64_t>> argDescs;
  for (size_t i = 0; i < f.inputs.size(); ++i)
    argDescs.push_back(descriptor(inputs[i].data(), useLocal
                                                        ? f.inputs[i].local
                                                        : f.inputs[i].global));
  size_t resultWords = 0;
  for (const TensorSpec &t : f.outputs)
    resultWords += 3 + 2 * t.global.size();
  std::vector<int64_t> results(resultWords + 1, 0);
  std::vector<void *> argv;
  if (!f.outputs.empty())
    argv.push_back(results.data());
  for (auto &d : argDescs)
    argv.push_back(d.data());
  p.entry(argv.data());
  std::vector<char *> outs;
  std::set<intptr_t> inputPtrs;
  for (auto &in : inputs)
    inputPtrs.insert((intptr_t)in.data());
  size_t w = 0;
  for (const TensorSpec &t : f.outputs) {
    char *alloc = (char *)(intptr_t)results[w];
    char *aligned = (char *)(intptr_t)results[w + 1];
    int64_t offset = results[w + 2];
    const std::vector<int64_t> &shape = useLocal ? t.local : t.global;
    int64_t count = 1;
    for (int64_t s : shape)
      count *= s;
    // Copy out: the buffer may alias an input or another output.
    char *copy = (char *)malloc(std::max<int64_t>(1, count * t.elementSize()));
    memcpy(copy, aligned + offset * t.elementSize(), count * t.elementSize());
    outs.push_back(copy);
    if (!inputPtrs.count((intptr_t)aligned) &&
        !inputPtrs.count((intptr_t)alloc)) {
      inputPtrs.insert((intptr_t)aligned);
      inputPtrs.insert((intptr_t)alloc);
      free(alloc);
    }
    w += 3 + 2 * t.global.size();
  }
  return outs;
}

//===----------------------------------------------------------------------===//
// Launching
//===----------------------------------------------------------------------===//

bool insideMPIJob() {
  return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") ||
         getenv("PMIX_RANK") || getenv("SLURM_PROCID") ||
         getenv("PAR_RUN_WORKER");
}

/// A fresh directory under $TMPDIR (or /tmp) for one job's OpenMPI session
/// files. Concurrent mpirun jobs sharing OpenMPI 4's per-user session
/// directory race on creating and removing it ("mkdir ... File exists ...
/// orte_session_dir failed"); a private base per job removes the race.
std::string makeSessionDir() {
  const char *base = getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") +
                     "/par-run.XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back(0);
  if (!mkdtemp(buf.data()))
    fail("cannot create a session directory '" + tmpl +
         "': " + strerror(errno));
  return buf.data();
}

void removeTree(const std::string &dir) {
  nftw(
      dir.c_str(),
      [](const char *path, const struct stat *, int, struct FTW *) {
        remove(path);
        return 0;
      },
      16, FTW_DEPTH | FTW_PHYS);
}

pid_t launchedJob = -1;

void forwardSignal(int sig) {
  if (launchedJob > 0)
    kill(launchedJob, sig);
}

int launch(const Options &o, int argc, char **argv) {
  std::string self = "/proc/self/exe";
  char buf[4096];
  ssize_t n = readlink(self.c_str(), buf, sizeof(buf) - 1);
  if (n > 0) {
    buf[n] = 0;
    self = buf;
  }
  std::string session = makeSessionDir();
  std::vector<std::string> args = {"mpirun", "-n", std::to_string(o.ranks),
                                   "--oversubscribe", "--mca",
                                   "orte_tmpdir_base", session};
  if (geteuid() == 0) {
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  }
  // A rank that fails takes the job down (OpenMPI's default); keep it quick.
  setenv("OMPI_MCA_orte_abort_on_non_zero_status", "1", 0);
  setenv("PAR_RUN_WORKER", "1", 1);
  args.push_back("-x");
  args.push_back("PAR_RUN_WORKER");
  if (getenv("PAR_RUN_INJECT_CRASH")) {
    args.push_back("-x");
    args.push_back("PAR_RUN_INJECT_CRASH");
  }
  args.push_back(self);
  for (int i = 1; i < argc; ++i)
    args.push_back(argv[i]);
  std::vector<char *> cargs;
  for (std::string &a : args)
    cargs.push_back(a.data());
  cargs.push_back(nullptr);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    removeTree(session);
    fail(std::string("cannot start mpirun: ") + strerror(errno));
  }
  if (pid == 0) {
    // Everything the job writes to a temporary directory (OpenMPI's and
    // PMIx's session files included) lands in the private one.
    setenv("TMPDIR", session.c_str(), 1);
    execvp("mpirun", cargs.data());
    fprintf(stderr, "par-run: error: cannot start mpirun: %s (install "
                    "openmpi-bin)\n", strerror(errno));
    _exit(127);
  }
  launchedJob = pid;
  signal(SIGINT, forwardSignal);
  signal(SIGTERM, forwardSignal);
  signal(SIGHUP, forwardSignal);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  removeTree(session);
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

void check(par_status_t s, par_rt_context_t *ctx, const std::string &what) {
  if (s != PAR_OK)
    fail(what + ": " + par_rt_context_last_error(ctx));
}

double tolerance(const std::string &dtype) {
  if (dtype == "f64")
    return 1e-12;
  if (dtype == "f32")
    return 1e-5;
  return 0; // integers: exact
}

/// The character-level tokenizer: printable ASCII 32..126 -> 0..94,
/// newline -> 95, anything else -> 0 (a space). 96 symbols.
int64_t charToken(unsigned char c) {
  if (c >= 32 && c <= 126)
    return c - 32;
  return c == '\n' ? 95 : 0;
}

/// Batches of windows of a corpus: row r of step s starts at a position
/// drawn from (seed, s, r) alone, so every layout sees the same batch.
struct DataLoader {
  std::vector<int64_t> tokens;
  size_t tokensArg = 0, targetsArg = 1;
  uint64_t seed = 0;

  void load(const std::string &path) {
    FILE *f = fopen(path.c_str(), "rb");
    if (!f)
      fail("cannot open data file '" + path + "': " + strerror(errno));
    int c;
    while ((c = fgetc(f)) != EOF)
      tokens.push_back(charToken((unsigned char)c));
    fclose(f);
  }
  void check(const FunctionSpec &f) const {
    for (size_t a : {tokensArg, targetsArg}) {
      if (a >= f.inputs.size())
        fail("--data: '" + f.name + "' has no arg" + std::to_string(a));
      const TensorSpec &t = f.inputs[a];
      if (t.dtype != "i64" || t.global.size() != 2)
        fail("--data: arg" + std::to_string(a) + " of '" + f.name +
             "' must be an i64 [batch, seq] tensor");
      if ((int64_t)tokens.size() < t.global[1] + 2)
        fail("--data: the corpus is shorter than one window");
    }
  }
  /// Fills the local block (at `offset`) of micro-batch `mb` of `m` of a
  /// token (or, with `isTarget`, target) tensor `t`: its row i is row
  /// i * m + mb of the step's global batch, as par-optimizer's
  /// micro-batches=m slices it.
  void fillMicro(const TensorSpec &t, bool isTarget, int64_t step, int64_t m,
                 int64_t mb, char *buf, const std::vector<int64_t> &offset) const {
    int64_t seq = t.global[1];
    uint64_t windows = tokens.size() - seq - 1;
    forEachElement(t, offset, [&](int64_t l, int64_t g) {
      int64_t row = (g / seq) * m + mb, col = g % seq;
      double r = generate(seed ^ 0xDA7Aull, step, row);
      uint64_t start = (uint64_t)((r + 1.0) / 2.0 * windows);
      ((int64_t *)buf)[l] = tokens[start + col + (isTarget ? 1 : 0)];
    });
  }
  /// Fills argument `a` (block at `offset` if local) for step `step`.
  void fill(const FunctionSpec &f, size_t a, int64_t step, char *buf,
            const std::vector<int64_t> &offset, bool local) const {
    const TensorSpec &t = f.inputs[a];
    int64_t seq = t.global[1];
    uint64_t windows = tokens.size() - seq - 1;
    int64_t shift = a == targetsArg ? 1 : 0;
    TensorSpec whole = t;
    if (!local)
      whole.local = t.global;
    forEachElement(whole, local ? offset : std::vector<int64_t>(2, 0),
                   [&](int64_t l, int64_t g) {
                     int64_t row = g / seq, col = g % seq;
                     double r = generate(seed ^ 0xDA7Aull, step, row);
                     uint64_t start = (uint64_t)((r + 1.0) / 2.0 * windows);
                     ((int64_t *)buf)[l] = tokens[start + col + shift];
                   });
  }
};

/// Checks that `f` can be iterated: it has feedback pairs, each result has
/// its argument's layout, and the loss (result 0) is a replicated scalar.
void checkTrainStep(const FunctionSpec &f) {
  if (f.feedback.empty())
    fail("'" + f.name + "' is not a train step (its manifest has no "
         "feedback; build one with par-autodiff and par-optimizer)");
  for (auto [r, a] : f.feedback) {
    const TensorSpec &out = f.outputs[r], &in = f.inputs[a];
    if (out.local != in.local || out.dims != in.dims ||
        out.partial != in.partial || out.dtype != in.dtype)
      fail("result" + std::to_string(r) + " of '" + f.name +
           "' is laid out differently from arg" + std::to_string(a) +
           ", which it feeds; give both the same sharding");
  }
  const TensorSpec &loss = f.outputs[0];
  bool replicated = loss.partial.empty();
  for (auto &d : loss.dims)
    replicated &= d.empty();
  if (loss.globalCount() != 1 || !replicated)
    fail("the loss of '" + f.name + "' (result0) must be a replicated scalar");
}

/// Copies each fed-back result into its argument's buffer and frees `outs`
/// except result 0's slot, which is returned.
double feedBack(const FunctionSpec &f, std::vector<char *> &outs,
                std::vector<std::vector<char>> &buffers, bool useLocal) {
  for (auto [r, a] : f.feedback) {
    const TensorSpec &t = f.outputs[r];
    int64_t count = useLocal ? t.localCount() : t.globalCount();
    memcpy(buffers[a].data(), outs[r], count * t.elementSize());
  }
  double loss = loadValue(f.outputs[0], outs[0], 0);
  return loss;
}

/// The tokenizer's inverse (charToken).
char tokenChar(int64_t t) {
  if (t >= 0 && t <= 94)
    return (char)(t + 32);
  return t == 95 ? '\n' : '?';
}

/// Writes the loss per step as an SVG line plot (opens in any browser).
void writeLossPlot(const std::string &path, const std::vector<double> &losses,
                   const std::string &title) {
  FILE *f = fopen(path.c_str(), "w");
  if (!f)
    fail("cannot write '" + path + "': " + strerror(errno));
  const double W = 640, H = 400, L = 60, R = 20, T = 40, B = 50;
  double lo = INFINITY, hi = -INFINITY;
  for (double l : losses)
    if (std::isfinite(l)) {
      lo = std::min(lo, l);
      hi = std::max(hi, l);
    }
  if (!std::isfinite(lo)) {
    lo = 0;
    hi = 1;
  }
  if (hi - lo < 1e-9) {
    lo -= 0.5;
    hi += 0.5;
  }
  size_t n = losses.size();
  auto x = [&](double step) {
    return L + (n > 1 ? (step - 1) / (double)(n - 1) : 0.5) * (W - L - R);
  };
  auto y = [&](double v) { return T + (hi - v) / (hi - lo) * (H - T - B); };
  fprintf(f,
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" "
          "height=\"%g\" font-family=\"sans-serif\" font-size=\"12\">\n"
          "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
          "<text x=\"%g\" y=\"24\" text-anchor=\"middle\" "
          "font-size=\"15\">%s</text>\n",
          W, H, W / 2, title.c_str());
  // Axes, with 5 ticks each.
  fprintf(f,
          "<path d=\"M%g %g V%g H%g\" stroke=\"black\" fill=\"none\"/>\n",
          L, T, H - B, W - R);
  for (int i = 0; i <= 4; ++i) {
    double v = lo + (hi - lo) * i / 4.0;
    fprintf(f,
            "<text x=\"%g\" y=\"%g\" text-anchor=\"end\">%.3g</text>\n"
            "<path d=\"M%g %g H%g\" stroke=\"#ddd\"/>\n",
            L - 6, y(v) + 4, v, L, y(v), W - R);
    double st = 1 + (n > 1 ? (n - 1) * i / 4.0 : 0);
    fprintf(f, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">%.0f</text>\n",
            x(st), H - B + 18, st);
  }
  fprintf(f,
          "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">step</text>\n"
          "<text x=\"16\" y=\"%g\" transform=\"rotate(-90 16 %g)\" "
          "text-anchor=\"middle\">loss</text>\n",
          (L + W - R) / 2, H - 12, (T + H - B) / 2, (T + H - B) / 2);
  fprintf(f, "<polyline fill=\"none\" stroke=\"#1f77b4\" "
             "stroke-width=\"1.5\" points=\"");
  for (size_t i = 0; i < n; ++i)
    if (std::isfinite(losses[i]))
      fprintf(f, "%.1f,%.1f ", x(i + 1), y(losses[i]));
  fprintf(f, "\"/>\n</svg>\n");
  fclose(f);
}

/// The training loop's record: every rank keeps the losses; rank 0 prints
/// the progress line, writes the loss CSV (--loss-csv) and at the end the
/// plot (--loss-plot).
struct TrainLog {
  const Options &o;
  bool printing;
  FILE *csv = nullptr;
  double start = par_rt_now_seconds();
  std::vector<double> losses;

  TrainLog(const Options &o, bool rank0) : o(o), printing(rank0) {
    if (!printing || o.lossCsv.empty())
      return;
    csv = fopen(o.lossCsv.c_str(), "w");
    if (!csv)
      fail("cannot write '" + o.lossCsv + "': " + strerror(errno));
    fprintf(csv, "step,loss,seconds\n");
  }
  /// One step's loss and time; `tokens` < 0 when there is no token count.
  void step(int64_t step, double loss, double seconds, double tokens) {
    losses.push_back(loss);
    if (!printing)
      return;
    double done = par_rt_now_seconds() - start;
    printf("step %lld/%lld  loss %.6g  %.4f s/step", (long long)step,
           (long long)o.steps, loss, seconds);
    if (tokens >= 0)
      printf("  %.0f tokens/s", tokens / std::max(seconds, 1e-9));
    printf("  %.1f s left\n", done / step * (o.steps - step));
    fflush(stdout);
    if (csv)
      fprintf(csv, "%lld,%.9g,%.6f\n", (long long)step, loss, done);
  }
  void finish(const std::string &title) {
    if (csv)
      fclose(csv);
    csv = nullptr;
    if (printing && !o.lossPlot.empty()) {
      writeLossPlot(o.lossPlot, losses, title);
      printf("par-run: wrote the loss plot %s\n", o.lossPlot.c_str());
    }
  }
};

/// Gathers every rank's block of output `t` to rank 0 and assembles the
/// global tensor there (partial values reduced); other ranks get nothing.
std::vector<char> assembleGlobal(par_rt_context_t *ctx, const FunctionSpec &f,
                                 const TensorSpec &t, const char *local,
                                 int64_t rank, int64_t world) {
  int64_t bytes = t.localCount() * t.elementSize();
  std::vector<char> gathered(rank == 0 ? bytes * world : 1);
  check(par_rt_gather_world(ctx, local, bytes, gathered.data()), ctx,
        "gathering a result");
  if (rank != 0)
    return {};
  std::vector<double> acc(t.globalCount(), 0.0);
  std::vector<bool> seen(t.globalCount(), false);
  for (int64_t r = 0; r < world; ++r) {
    std::vector<int64_t> c = coordsOf(f, r);
    // Axes neither splitting a dim nor partial replicate: take one copy.
    bool contributes = true;
    for (size_t a = 0; a < f.axisNames.size(); ++a) {
      bool used = std::find(t.partial.begin(), t.partial.end(),
                            f.axisNames[a]) != t.partial.end();
      for (auto &dim : t.dims)
        used |= std::find(dim.begin(), dim.end(), f.axisNames[a]) != dim.end();
      if (!used && c[a] != 0)
        contributes = false;
    }
    if (!contributes)
      continue;
    const char *block = gathered.data() + r * bytes;
    forEachElement(t, blockOffset(f, t, c), [&](int64_t l, int64_t g) {
      double v = loadValue(t, block, l);
      if (!seen[g])
        acc[g] = v;
      else if (t.partialKind == "max")
        acc[g] = std::max(acc[g], v);
      else if (t.partialKind == "min")
        acc[g] = std::min(acc[g], v);
      else
        acc[g] += v;
      seen[g] = true;
    });
  }
  std::vector<char> g(std::max<int64_t>(1, t.globalCount() * t.elementSize()));
  for (int64_t i = 0; i < t.globalCount(); ++i)
    storeValue(t, g.data(), i, acc[i]);
  return g;
}

/// The next token from the logits at `base` (row 0, the last filled
/// position): argmax at temperature 0, else drawn from softmax(logits / T)
/// with the seed's generator (draw `n`).
int64_t drawToken(const Options &o, const TensorSpec &lt, const char *logits,
                  int64_t base, int64_t vocab, int64_t n) {
  std::vector<double> p(vocab);
  double best = -INFINITY;
  int64_t next = 0;
  for (int64_t v = 0; v < vocab; ++v) {
    p[v] = loadValue(lt, logits, base + v);
    if (p[v] > best) {
      best = p[v];
      next = v;
    }
  }
  if (o.temperature > 0) {
    double sum = 0;
    for (double &x : p)
      sum += (x = std::exp((x - best) / o.temperature));
    double u = (generate(o.seed ^ 0x5A3B1Eull, n, 0) + 1.0) / 2.0 * sum;
    for (next = 0; next + 1 < vocab && u >= p[next]; ++next)
      u -= p[next];
  }
  return next;
}

/// Prints a sample and the prompt it continues.
void printSample(const Options &o, const std::string &text) {
  printf("par-run: sample (%lld characters, temperature %g) after the "
         "prompt \"",
         (long long)o.sample, o.temperature);
  for (char c : o.prompt)
    printf(c == '\n' ? "\\n" : "%c", c);
  printf("\":\n%s\n", text.c_str());
}

/// Samples text from a trained model: the logits entry `s` takes the train
/// step's arguments without the targets (same order, same layouts), so it
/// runs on the step's trained parameters as they are, on every rank. Each
/// character: the context's last `seq` tokens fill every row of the token
/// batch, and rank 0 draws the next token from softmax(logits / T) at the
/// last filled position (argmax for T = 0) and broadcasts it.
std::string sampleText(par_rt_context_t *ctx, const Options &o,
                       const FunctionSpec &f,
                       std::vector<std::vector<char>> &stepLocals,
                       size_t tokensArg, size_t targetsArg, int64_t rank,
                       int64_t world) {
  std::string name = o.sampleEntry;
  if (name.empty()) {
    name = f.name;
    if (name.size() > 5 && name.compare(name.size() - 5, 5, "_step") == 0)
      name.resize(name.size() - 5);
    name += "_logits";
  }
  FunctionSpec s = loadManifest(o.artifact + "/sharded.json", name);
  if (s.axisSizes != f.axisSizes)
    fail("--sample: '" + name + "' runs on a different mesh than '" +
         f.name + "'");
  if (tokensArg == targetsArg || s.inputs.size() + 1 > f.inputs.size())
    fail("--sample: '" + name + "' must take the arguments of '" + f.name +
         "' without the targets (arg" + std::to_string(targetsArg) + ")");
  size_t tok = tokensArg < targetsArg ? tokensArg : tokensArg - 1;
  std::vector<size_t> from; // s's arg i is the step's arg from[i]
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    size_t j = i < targetsArg ? i : i + 1;
    const TensorSpec &a = s.inputs[i], &b = f.inputs[j];
    // The tokens may differ in batch (a step that accumulates micro-batches
    // takes several); everything else is the step's own state.
    if (i == tok ? a.dtype != "i64" || a.global.size() != 2
                 : a.dtype != b.dtype || a.local != b.local ||
                       a.dims != b.dims || a.partial != b.partial)
      fail("--sample: arg" + std::to_string(i) + " of '" + name +
           "' does not match arg" + std::to_string(j) + " of '" + f.name +
           "' (type or sharding)");
    from.push_back(j);
  }
  const TensorSpec &tt = s.inputs[tok];
  if (s.outputs.size() != 1 || s.outputs[0].global.size() != 3 ||
      s.outputs[0].global[0] != tt.global[0] ||
      s.outputs[0].global[1] != tt.global[1])
    fail("--sample: '" + name + "' must return logits [batch, seq, vocab]");
  const TensorSpec &lt = s.outputs[0];
  int64_t seq = tt.global[1], vocab = lt.global[2];
  Program prog = loadProgram(o.artifact + "/sharded.so", s.name);
  std::vector<std::vector<char>> args;
  for (size_t i = 0; i < s.inputs.size(); ++i)
    args.push_back(i == tok ? std::vector<char>(std::max<int64_t>(
                                  1, tt.localCount() * tt.elementSize()))
                            : stepLocals[from[i]]);
  std::vector<int64_t> coords = coordsOf(s, rank);
  std::vector<int64_t> context;
  for (unsigned char c : o.prompt)
    context.push_back(charToken(c));
  std::string text;
  for (int64_t n = 0; n < o.sample; ++n) {
    int64_t start = std::max<int64_t>(0, (int64_t)context.size() - seq);
    int64_t used = context.size() - start;
    forEachElement(tt, blockOffset(s, tt, coords), [&](int64_t l, int64_t g) {
      int64_t col = g % seq;
      ((int64_t *)args[tok].data())[l] = col < used ? context[start + col] : 0;
    });
    std::vector<char *> outs = call(prog, s, args, /*useLocal=*/true);
    std::vector<char> logits =
        assembleGlobal(ctx, s, lt, outs[0], rank, world);
    free(outs[0]);
    int64_t next =
        rank == 0 ? drawToken(o, lt, logits.data(), (used - 1) * vocab, vocab, n)
                  : 0;
    check(par_rt_broadcast_world(ctx, &next, sizeof(next), 0), ctx,
          "broadcasting a sampled token");
    context.push_back(next);
    text += tokenChar(next);
  }
  return text;
}

//===----------------------------------------------------------------------===//
// Pipeline driver
//===----------------------------------------------------------------------===//
//
// A pipelined artifact (par-pipeline-split, par-autodiff, par-optimizer,
// par-pipeline-schedule) holds per stage s a forward `f_s<s>_fwd`, a
// backward `f_s<s>_grad` and an update `f_s<s>_update`, plus every pipeline
// rank's ordered actions. Each rank keeps the parameters and optimizer
// state of its own stages only, runs its actions as they are listed
// (transfers over the pipeline axis with the runtime's send/recv), sums
// each parameter gradient over the micro-batches and then applies its
// stages' updates. A backward recomputes its stage's forward from the
// stashed stage input (full activation recomputation), so what a stage
// holds per micro-batch in flight is its input activation.

struct StageProgram {
  FunctionSpec fwd, grad, update;
  Program fwdP, gradP, updateP;
  /// ZB-H1's halves of the backward: input gradient (stages > 0), weight
  /// gradients.
  FunctionSpec gradInput, gradWeight;
  Program gradInputP, gradWeightP;
  /// Parameter buffers by the split function's argument index.
  std::map<int64_t, std::vector<char>> params;
  /// The update's state arguments (after params and grads), and the sums
  /// of the gradients over the micro-batches.
  std::vector<std::vector<char>> state, gradSum;
  /// Indices (into fwd's arguments) of the parameters, in update order.
  std::vector<size_t> paramArgs;
};

/// A trace record: an action (op >= 0, a pl::Op), the optimizer update
/// (-1) or a collective / transfer the runtime ran inside an action (-2,
/// `name`).
struct TraceEvent {
  int32_t op, mb, stage, pad;
  double t0, t1;
  char name[24];
};

int64_t rankOfCoords(const FunctionSpec &f, const std::vector<int64_t> &c) {
  int64_t r = 0;
  for (size_t i = 0; i < c.size(); ++i)
    r = r * f.axisSizes[i] + c[i];
  return r;
}

int32_t dtypeCode(const std::string &d) {
  if (d == "f32") return PAR_F32;
  if (d == "f64") return PAR_F64;
  if (d == "f16") return PAR_F16;
  if (d == "bf16") return PAR_BF16;
  if (d == "i32") return PAR_I32;
  if (d == "i64") return PAR_I64;
  fail("pipeline transfers of " + d + " are not supported");
}

int runPipeline(par_rt_context_t *ctx, const Options &o, int64_t rank,
                int64_t world) {
  namespace pl = par::pipeline;
  std::string manifest = o.artifact + "/sharded.json";
  auto buffer = llvm::MemoryBuffer::getFile(manifest);
  if (!buffer)
    fail("cannot read manifest '" + manifest + "'");
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*buffer)->getBuffer());
  if (!json)
    fail("manifest '" + manifest + "' is not valid JSON");
  const llvm::json::Object *pipe =
      json->getAsObject() ? json->getAsObject()->getObject("pipeline")
                          : nullptr;
  const llvm::json::Array *lines = pipe ? pipe->getArray("programs") : nullptr;
  if (!pipe || !lines || !pipe->getString("func") || !pipe->getString("axis"))
    fail("'" + o.artifact + "' is not a pipelined program (build it with "
         "par-pipeline-split and par-pipeline-schedule)");
  std::string func = pipe->getString("func")->str();
  std::string axisName = pipe->getString("axis")->str();
  int64_t p = pipe->getInteger("p").value_or(0),
          m = pipe->getInteger("m").value_or(0),
          v = pipe->getInteger("v").value_or(0);
  // The programs, verified again here (the manifest may be hand-edited).
  std::string text = "pipeline p=" + std::to_string(p) + " m=" +
                     std::to_string(m) + " v=" + std::to_string(v) +
                     " backward=" +
                     (pipe->getString("backward")
                          ? pipe->getString("backward")->str()
                          : std::string("full")) +
                     "\n";
  for (size_t r = 0; r < lines->size(); ++r) {
    std::optional<llvm::StringRef> line = (*lines)[r].getAsString();
    if (!line)
      fail("manifest: pipeline programs must be strings");
    text += "rank " + std::to_string(r) + ": " + line->str() + "\n";
  }
  pl::PipelineShape shape;
  pl::Programs programs;
  std::string error;
  if (!pl::parsePrograms(text, "pipeline", shape, programs, error))
    fail(error);
  pl::VerifyResult verified = pl::verifyPrograms(shape, programs, pl::Costs());
  if (!verified.ok)
    fail("the pipeline programs would not run: " + verified.errors.front());
  int64_t S = shape.numStages();

  std::vector<StageProgram> stages(S);
  for (int64_t s = 0; s < S; ++s) {
    std::string base = func + "_s" + std::to_string(s);
    stages[s].fwd = loadManifest(manifest, base + "_fwd");
    stages[s].grad = loadManifest(manifest, base + "_grad");
    stages[s].update = loadManifest(manifest, base + "_update");
    if (shape.splitBackward) {
      if (s > 0)
        stages[s].gradInput = loadManifest(manifest, base + "_bi_grad");
      stages[s].gradWeight = loadManifest(manifest, base + "_bw_grad");
    }
  }
  const FunctionSpec &f0 = stages[0].fwd;
  if (f0.devices() != world)
    fail("the pipelined program's mesh has " + std::to_string(f0.devices()) +
         " devices but the job has " + std::to_string(world) + " ranks");
  int64_t ppAxis = f0.axisIndex(axisName);
  if (ppAxis < 0 || f0.axisSizes[ppAxis] != p)
    fail("the mesh has no '" + axisName + "' axis of size " +
         std::to_string(p));
  // Ranks run different stages from here on, but communicators are made
  // collectively over the world: make every one a stage may use (each
  // ordered list of the other axes) and the pipeline axis's now.
  {
    std::vector<int64_t> others;
    for (int64_t a = 0; a < (int64_t)f0.axisSizes.size(); ++a)
      if (a != ppAxis)
        others.push_back(a);
    std::vector<int64_t> codes{ppAxis + 1};
    std::function<void(int64_t, int64_t, uint64_t)> lists =
        [&](int64_t code, int64_t depth, uint64_t used) {
          for (size_t i = 0; i < others.size(); ++i)
            if (!(used >> i & 1)) {
              int64_t c = code | (others[i] + 1) << (8 * depth);
              codes.push_back(c);
              lists(c, depth + 1, used | 1ull << i);
            }
        };
    lists(0, 0, 0);
    for (int64_t c : codes)
      check(par_rt_context_prepare_axes(ctx, c), ctx,
            "preparing the communicators");
  }
  std::vector<int64_t> coords = coordsOf(f0, rank);
  int64_t me = coords[ppAxis];
  int64_t axesCode = ppAxis + 1;
  DataLoader data;
  data.seed = o.seed;
  if (!o.data.empty())
    data.load(o.data);
  // Without --data, data arguments take the generator's values of the
  // unpipelined step's (m-fold) arguments, the same every step.
  FunctionSpec stepSpec;
  if (o.data.empty())
    stepSpec = loadManifest(manifest, func + "_step");

  // Parameters (initialised exactly as the unpipelined step's arguments of
  // the same index) and optimizer state, on the stages of this rank only.
  for (int64_t s = me; s < S; s += p) {
    StageProgram &st = stages[s];
    st.fwdP = loadProgram(o.artifact + "/sharded.so", st.fwd.name);
    st.gradP = loadProgram(o.artifact + "/sharded.so", st.grad.name);
    st.updateP = loadProgram(o.artifact + "/sharded.so", st.update.name);
    if (shape.splitBackward) {
      if (s > 0)
        st.gradInputP =
            loadProgram(o.artifact + "/sharded.so", st.gradInput.name);
      st.gradWeightP =
          loadProgram(o.artifact + "/sharded.so", st.gradWeight.name);
    }
    const FunctionSpec &u = st.update;
    size_t P = u.stageArgs.size();
    for (size_t j = 0; j < P; ++j) {
      int64_t orig = u.stageArgs[j];
      auto it = std::find(st.fwd.stageArgs.begin(), st.fwd.stageArgs.end(),
                          orig);
      if (it == st.fwd.stageArgs.end())
        fail("manifest: parameter arg" + std::to_string(orig) + " of stage " +
             std::to_string(s) + " is not an argument of its forward");
      st.paramArgs.push_back(it - st.fwd.stageArgs.begin());
      const TensorSpec &t = u.inputs[j];
      std::vector<char> buf(std::max<int64_t>(1, t.localCount() * t.elementSize()));
      forEachElement(t, blockOffset(u, t, coords), [&](int64_t l, int64_t g) {
        storeValue(t, buf.data(), l, generateFor(t, o.seed, orig, g));
      });
      st.params[orig] = std::move(buf);
    }
    for (size_t i = 2 * P; i < u.inputs.size(); ++i) {
      const TensorSpec &t = u.inputs[i];
      std::vector<char> buf(std::max<int64_t>(1, t.localCount() * t.elementSize()));
      forEachElement(t, blockOffset(u, t, coords), [&](int64_t l, int64_t g) {
        storeValue(t, buf.data(), l, generateFor(t, o.seed, 0, g));
      });
      st.state.push_back(std::move(buf));
    }
    for (size_t j = 0; j < P; ++j)
      st.gradSum.emplace_back(
          std::max<int64_t>(1, u.inputs[P + j].localCount() *
                                   u.inputs[P + j].elementSize()));
  }

  // The arguments of stage s's forward (or, with dy, backward) for mb.
  auto stageArgs = [&](int64_t s, int64_t step, int64_t mb,
                       std::vector<char> *x, std::vector<char> *dy) {
    StageProgram &st = stages[s];
    const FunctionSpec &fs = dy || s + 1 == S ? st.grad : st.fwd;
    std::vector<std::vector<char>> args;
    for (size_t j = 0; j < st.fwd.stageArgs.size(); ++j) {
      int64_t orig = st.fwd.stageArgs[j];
      auto it = st.params.find(orig);
      if (it != st.params.end()) {
        args.push_back(it->second);
        continue;
      }
      const TensorSpec &t = fs.inputs[j];
      std::vector<char> buf(t.localCount() * t.elementSize());
      if (o.data.empty()) {
        // Row r of micro-batch mb is row r * m + mb of the step's argument.
        if ((size_t)orig >= stepSpec.inputs.size() || t.global.empty() ||
            stepSpec.inputs[orig].global[0] != t.global[0] * m)
          fail("stage " + std::to_string(s) + "'s arg" + std::to_string(orig) +
               " is not an m-fold argument of '" + stepSpec.name + "'");
        int64_t row = t.globalCount() / t.global[0];
        forEachElement(t, blockOffset(fs, t, coords), [&](int64_t l, int64_t g) {
          int64_t G = ((g / row) * m + mb) * row + g % row;
          storeValue(t, buf.data(), l,
                     generateFor(stepSpec.inputs[orig], o.seed, orig, G));
        });
        args.push_back(std::move(buf));
        continue;
      }
      if ((orig != o.tokensArg && orig != o.targetsArg) || t.dtype != "i64" ||
          t.global.size() != 2)
        fail("stage " + std::to_string(s) + " takes arg" +
             std::to_string(orig) + ", which is neither a parameter nor the "
             "tokens/targets (--tokens/--targets)");
      data.fillMicro(t, orig == o.targetsArg, step, m, mb, buf.data(),
                     blockOffset(fs, t, coords));
      args.push_back(std::move(buf));
    }
    if (s > 0)
      args.push_back(*x);
    if (dy)
      args.push_back(*dy);
    return args;
  };

  using Key = std::pair<int64_t, int64_t>; // (micro-batch, stage)
  std::map<Key, std::vector<char>> acts, grads, stash, dyStash;
  std::list<std::vector<char>> inFlight; // buffers of unfinished sends
  std::vector<TraceEvent> events;
  size_t peakStash = 0, peakStashBytes = 0, stashBytes = 0;
  const std::vector<pl::Action> &mine = programs[me];
  int64_t lossRoot =
      rankOfCoords(f0, [&] {
        std::vector<int64_t> c(coords.size(), 0);
        c[ppAxis] = shape.rankOf(S - 1);
        return c;
      }());
  const TensorSpec &lossSpec = stages[S - 1].fwd.outputs[0];
  TrainLog log(o, rank == 0);
  if (rank == 0) {
    const TensorSpec &tok = stages[0].fwd.inputs[0];
    int64_t dp = 1;
    for (size_t a = 0; a < f0.axisSizes.size(); ++a)
      for (auto &axes : tok.dims)
        if (std::find(axes.begin(), axes.end(), f0.axisNames[a]) != axes.end())
          dp *= f0.axisSizes[a];
    printf("par-run: pipeline %s: %lld stages on %lld ranks of '%s' (%s, "
           "v=%lld), %lld micro-batches; global batch %lld = micro-batch "
           "%lld x %lld micro-batches x %lld data-parallel\n",
           func.c_str(), (long long)S, (long long)p, axisName.c_str(),
           pipe->getString("schedule") ? pipe->getString("schedule")->str().c_str()
                                       : "?",
           (long long)v, (long long)m, (long long)(tok.global[0] * m),
           (long long)(tok.global[0] / dp), (long long)m, (long long)dp);
  }
  const std::vector<double> &losses = log.losses;
  for (int64_t step = 1; step <= o.steps; ++step) {
    double lossSum = 0;
    if (!o.trace.empty() && step == o.steps)
      par_rt_trace_enable(ctx, 1);
    double t0 = par_rt_now_seconds();
    for (const pl::Action &a : mine) {
      double e0 = par_rt_now_seconds();
      Key key{a.mb, a.stage};
      switch (a.op) {
      case pl::Op::F: {
        std::vector<char> x;
        if (a.stage > 0) {
          auto it = acts.find(key);
          if (it == acts.end())
            fail("pipeline: F(mb=" + std::to_string(a.mb) + ",s=" +
                 std::to_string(a.stage) + ") has no input activation");
          x = std::move(it->second);
          acts.erase(it);
        }
        std::vector<std::vector<char>> args =
            stageArgs(a.stage, step, a.mb, &x, nullptr);
        StageProgram &st = stages[a.stage];
        std::vector<char *> outs = call(st.fwdP, st.fwd, args, true);
        if (a.stage + 1 == S) {
          lossSum += loadValue(lossSpec, outs[0], 0);
        } else {
          const TensorSpec &y = st.fwd.outputs[0];
          acts[{a.mb, a.stage + 1}].assign(
              outs[0], outs[0] + y.localCount() * y.elementSize());
        }
        for (char *q : outs)
          free(q);
        stashBytes += x.size();
        stash[key] = std::move(x);
        peakStash = std::max(peakStash, stash.size());
        peakStashBytes = std::max(peakStashBytes, stashBytes);
        break;
      }
      case pl::Op::B: {
        StageProgram &st = stages[a.stage];
        std::vector<char> x = std::move(stash[key]);
        stashBytes -= x.size();
        stash.erase(key);
        std::vector<char> dy;
        if (a.stage + 1 < S) {
          auto it = grads.find({a.mb, a.stage + 1});
          if (it == grads.end())
            fail("pipeline: B(mb=" + std::to_string(a.mb) + ",s=" +
                 std::to_string(a.stage) + ") has no output gradient");
          dy = std::move(it->second);
          grads.erase(it);
        }
        std::vector<std::vector<char>> args = stageArgs(
            a.stage, step, a.mb, &x, a.stage + 1 < S ? &dy : nullptr);
        std::vector<char *> outs = call(st.gradP, st.grad, args, true);
        size_t P = st.paramArgs.size();
        for (size_t j = 0; j < P; ++j) {
          const TensorSpec &t = st.grad.outputs[1 + j];
          char *sum = st.gradSum[j].data();
          for (int64_t i = 0; i < t.localCount(); ++i)
            storeValue(t, sum, i, loadValue(t, sum, i) + loadValue(t, outs[1 + j], i));
        }
        if (a.stage > 0) {
          const TensorSpec &dx = st.grad.outputs[1 + P];
          grads[key].assign(outs[1 + P],
                            outs[1 + P] + dx.localCount() * dx.elementSize());
        }
        for (char *q : outs)
          free(q);
        break;
      }
      case pl::Op::SendAct:
      case pl::Op::SendGrad: {
        auto &pool = a.op == pl::Op::SendAct ? acts : grads;
        auto it = pool.find(key);
        if (it == pool.end())
          fail("pipeline: nothing to send for " + pl::formatAction(a));
        // act(mb, s) is stage s's input; grad(mb, s) its gradient: both
        // have the layout of stage s's input argument.
        // The send overlaps with what follows: the buffer stays alive in
        // `inFlight` until the step's sends are completed.
        const TensorSpec &t = stages[a.stage].fwd.inputs.back();
        inFlight.push_back(std::move(it->second));
        pool.erase(it);
        check(par_rt_send_async(ctx, inFlight.back().data(), t.localCount(),
                                dtypeCode(t.dtype), axesCode, a.peer,
                                a.op == pl::Op::SendAct ? 0 : 1),
              ctx, "sending " + pl::formatAction(a));
        break;
      }
      case pl::Op::RecvAct:
      case pl::Op::RecvGrad: {
        const TensorSpec &t = stages[a.stage].fwd.inputs.back();
        std::vector<char> buf(t.localCount() * t.elementSize());
        par_rt_k_recv((int64_t)(intptr_t)buf.data(), t.localCount(),
                      dtypeCode(t.dtype), axesCode, a.peer,
                      a.op == pl::Op::RecvAct ? 0 : 1);
        (a.op == pl::Op::RecvAct ? acts : grads)[key] = std::move(buf);
        break;
      }
      case pl::Op::BI: {
        // The input's gradient now (the stage before waits for it); the
        // stage input and dy stay for BW.
        StageProgram &st = stages[a.stage];
        std::vector<char> &x = stash[key];
        std::vector<char> dy;
        if (a.stage + 1 < S) {
          auto it = grads.find({a.mb, a.stage + 1});
          if (it == grads.end())
            fail("pipeline: BI(mb=" + std::to_string(a.mb) + ",s=" +
                 std::to_string(a.stage) + ") has no output gradient");
          dy = std::move(it->second);
          grads.erase(it);
        }
        if (a.stage > 0) {
          std::vector<std::vector<char>> args = stageArgs(
              a.stage, step, a.mb, &x, a.stage + 1 < S ? &dy : nullptr);
          std::vector<char *> outs =
              call(st.gradInputP, st.gradInput, args, true);
          const TensorSpec &dx = st.gradInput.outputs[1];
          grads[key].assign(outs[1], outs[1] + dx.localCount() * dx.elementSize());
          for (char *q : outs)
            free(q);
        }
        dyStash[key] = std::move(dy);
        break;
      }
      case pl::Op::BW: {
        StageProgram &st = stages[a.stage];
        std::vector<char> x = std::move(stash[key]);
        stashBytes -= x.size();
        stash.erase(key);
        std::vector<char> dy = std::move(dyStash[key]);
        dyStash.erase(key);
        std::vector<std::vector<char>> args = stageArgs(
            a.stage, step, a.mb, &x, a.stage + 1 < S ? &dy : nullptr);
        std::vector<char *> outs =
            call(st.gradWeightP, st.gradWeight, args, true);
        for (size_t j = 0; j < st.paramArgs.size(); ++j) {
          const TensorSpec &t = st.gradWeight.outputs[1 + j];
          char *sum = st.gradSum[j].data();
          for (int64_t i = 0; i < t.localCount(); ++i)
            storeValue(t, sum, i, loadValue(t, sum, i) + loadValue(t, outs[1 + j], i));
        }
        for (char *q : outs)
          free(q);
        break;
      }
      }
      if (!o.trace.empty() && step == o.steps) {
        events.push_back({(int32_t)a.op, a.mb, a.stage, 0, e0 - t0,
                          par_rt_now_seconds() - t0, {}});
        par_rt_trace_event_t k[256];
        int64_t n = par_rt_trace_take(ctx, k, 256);
        for (int64_t i = 0; i < n && i < 256; ++i) {
          TraceEvent e{-2, a.mb, a.stage, 0, k[i].start - t0, k[i].end - t0, {}};
          snprintf(e.name, sizeof(e.name), "%s", k[i].kernel);
          events.push_back(e);
        }
      }
    }
    check(par_rt_wait_sends(ctx), ctx, "completing sends");
    inFlight.clear();
    // The optimizer: each stage's update on its summed gradients.
    double u0 = par_rt_now_seconds();
    for (int64_t s = me; s < S; s += p) {
      StageProgram &st = stages[s];
      size_t P = st.paramArgs.size();
      std::vector<std::vector<char>> args;
      for (int64_t orig : st.update.stageArgs)
        args.push_back(st.params[orig]);
      for (auto &g : st.gradSum)
        args.push_back(g);
      for (auto &x : st.state)
        args.push_back(x);
      std::vector<char *> outs = call(st.updateP, st.update, args, true);
      for (size_t j = 0; j < P; ++j) {
        std::vector<char> &dst = st.params[st.update.stageArgs[j]];
        memcpy(dst.data(), outs[j], dst.size());
        std::fill(st.gradSum[j].begin(), st.gradSum[j].end(), 0);
      }
      for (size_t k = 0; k < st.state.size(); ++k)
        memcpy(st.state[k].data(), outs[P + k], st.state[k].size());
      for (char *q : outs)
        free(q);
    }
    if (!o.trace.empty() && step == o.steps)
      events.push_back({-1, 0, 0, 0, u0 - t0, par_rt_now_seconds() - t0, {}});
    double loss = lossSum / m;
    check(par_rt_broadcast_world(ctx, &loss, sizeof(loss), lossRoot), ctx,
          "broadcasting the loss");
    log.step(step, loss, par_rt_now_seconds() - t0,
             o.data.empty()
                 ? -1.0
                 : double(stages[0].fwd.inputs[0].globalCount() * m));
  }
  log.finish("par-run: " + func + " pipelined on " + std::to_string(world) +
             " ranks, loss per step");

  // Per pipeline rank: the most stage inputs held at once (activations in
  // flight: recomputation keeps nothing else per micro-batch).
  double mineStats[2] = {(double)peakStash, (double)peakStashBytes};
  std::vector<double> allStats(2 * world);
  check(par_rt_gather_world(ctx, mineStats, sizeof(mineStats), allStats.data()),
        ctx, "gathering statistics");
  if (rank == 0) {
    printf("par-run: peak in-flight activations (stage inputs held), per "
           "pipeline rank:");
    for (int64_t r = 0; r < p; ++r) {
      std::vector<int64_t> c(coords.size(), 0);
      c[ppAxis] = r;
      int64_t w = rankOfCoords(f0, c);
      printf(" %lld: %.0f (%.0f bytes)", (long long)r, allStats[2 * w],
             allStats[2 * w + 1]);
    }
    printf("\n");
  }

  // The Chrome trace of the last step: one track per rank.
  if (!o.trace.empty()) {
    int64_t n = events.size(), most = 0;
    std::vector<int64_t> counts(world);
    check(par_rt_gather_world(ctx, &n, sizeof(n), counts.data()), ctx,
          "gathering trace sizes");
    if (rank == 0)
      most = *std::max_element(counts.begin(), counts.end());
    check(par_rt_broadcast_world(ctx, &most, sizeof(most), 0), ctx,
          "broadcasting trace sizes");
    events.resize(std::max<int64_t>(most, 1));
    std::vector<TraceEvent> all(rank == 0 ? events.size() * world : 1);
    check(par_rt_gather_world(ctx, events.data(),
                              events.size() * sizeof(TraceEvent), all.data()),
          ctx, "gathering the trace");
    if (rank == 0) {
      FILE *tf = fopen(o.trace.c_str(), "w");
      if (!tf)
        fail("cannot write '" + o.trace + "': " + strerror(errno));
      fprintf(tf, "{\"traceEvents\": [\n");
      bool first = true;
      auto emit = [&](int64_t r, const char *name, const char *cat, double a,
                      double b) {
        fprintf(tf,
                "%s{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", "
                "\"pid\": 0, \"tid\": %lld, \"ts\": %.3f, \"dur\": %.3f}",
                first ? "" : ",\n", name, cat, (long long)r, a * 1e6,
                (b - a) * 1e6);
        first = false;
      };
      for (int64_t r = 0; r < world; ++r) {
        fprintf(tf,
                "%s{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, "
                "\"tid\": %lld, \"args\": {\"name\": \"rank %lld\"}}",
                first ? "" : ",\n", (long long)r, (long long)r);
        first = false;
        double last = 0;
        for (int64_t i = 0; i < counts[r]; ++i) {
          const TraceEvent &e = all[r * events.size() + i];
          if (e.op == -2) { // inside the action before it, nested
            emit(r, e.name, "collective", e.t0, e.t1);
            continue;
          }
          if (e.t0 > last)
            emit(r, "idle", "idle", last, e.t0);
          std::string name;
          const char *cat = "update";
          if (e.op < 0) {
            name = "optimizer update";
          } else {
            pl::Action act;
            act.op = (pl::Op)e.op;
            act.mb = e.mb;
            act.stage = e.stage;
            name = pl::formatAction(act);
            cat = act.op == pl::Op::F    ? "forward"
                  : act.op == pl::Op::B  ? "backward"
                  : act.op == pl::Op::BI ? "backward-input"
                  : act.op == pl::Op::BW ? "weight-gradient"
                  : act.isSend()         ? "send"
                                         : "recv";
          }
          emit(r, name.c_str(), cat, e.t0, e.t1);
          last = e.t1;
        }
      }
      fprintf(tf, "\n]}\n");
      fclose(tf);
      printf("par-run: wrote the trace %s (last step; open in Perfetto)\n",
             o.trace.c_str());
    }
  }

  // --sample: every stage's parameters gathered on rank 0, which runs the
  // unsharded logits function (reference.so) on them.
  if (o.sample > 0) {
    std::map<int64_t, std::vector<char>> whole; // by split-function argument
    for (int64_t s = 0; s < S; ++s) {
      const FunctionSpec &u = stages[s].update;
      int64_t owner = shape.rankOf(s);
      for (size_t j = 0; j < u.stageArgs.size(); ++j) {
        const TensorSpec &t = u.inputs[j];
        int64_t bytes = t.localCount() * t.elementSize();
        std::vector<char> local(std::max<int64_t>(1, bytes), 0);
        if (me == owner)
          memcpy(local.data(), stages[s].params[u.stageArgs[j]].data(), bytes);
        std::vector<char> gathered(rank == 0 ? bytes * world : 1);
        check(par_rt_gather_world(ctx, local.data(), bytes, gathered.data()),
              ctx, "gathering parameters");
        if (rank != 0)
          continue;
        std::vector<char> g(std::max<int64_t>(1, t.globalCount() * t.elementSize()));
        for (int64_t r = 0; r < world; ++r) {
          std::vector<int64_t> c = coordsOf(u, r);
          bool contributes = c[ppAxis] == owner;
          for (size_t a = 0; a < c.size(); ++a) {
            bool used = (int64_t)a == ppAxis;
            for (auto &dim : t.dims)
              used |= std::find(dim.begin(), dim.end(), u.axisNames[a]) !=
                      dim.end();
            contributes &= used || c[a] == 0;
          }
          if (!contributes)
            continue;
          forEachElement(t, blockOffset(u, t, c), [&](int64_t l, int64_t gi) {
            storeValue(t, g.data(), gi,
                       loadValue(t, gathered.data() + r * bytes, l));
          });
        }
        whole[u.stageArgs[j]] = std::move(g);
      }
    }
    if (rank == 0) {
      std::string name = o.sampleEntry.empty() ? func + "_logits" : o.sampleEntry;
      FunctionSpec sf = loadManifest(o.artifact + "/reference.json", name);
      Program prog = loadProgram(o.artifact + "/reference.so", sf.name);
      size_t tok = o.tokensArg < o.targetsArg ? o.tokensArg : o.tokensArg - 1;
      std::vector<std::vector<char>> args;
      for (size_t i = 0; i < sf.inputs.size(); ++i) {
        const TensorSpec &t = sf.inputs[i];
        int64_t orig = i < (size_t)o.targetsArg ? i : i + 1;
        auto it = whole.find(orig);
        if (i != tok && (it == whole.end() ||
                         (int64_t)it->second.size() !=
                             t.globalCount() * t.elementSize()))
          fail("--sample: arg" + std::to_string(i) + " of '" + name +
               "' is not a parameter of the pipelined '" + func + "'");
        args.push_back(i == tok ? std::vector<char>(t.globalCount() *
                                                    t.elementSize())
                                : it->second);
      }
      const TensorSpec &tt = sf.inputs[tok];
      if (sf.outputs.size() != 1 || sf.outputs[0].global.size() != 3 ||
          tt.dtype != "i64" || tt.global.size() != 2)
        fail("--sample: '" + name + "' must map tokens [batch, seq] to "
             "logits [batch, seq, vocab]");
      const TensorSpec &lt = sf.outputs[0];
      int64_t seq = tt.global[1], vocab = lt.global[2];
      std::vector<int64_t> context;
      for (unsigned char c : o.prompt)
        context.push_back(charToken(c));
      std::string text;
      for (int64_t n = 0; n < o.sample; ++n) {
        int64_t first = std::max<int64_t>(0, (int64_t)context.size() - seq);
        int64_t used = context.size() - first;
        for (int64_t g = 0; g < tt.globalCount(); ++g)
          ((int64_t *)args[tok].data())[g] =
              g % seq < used ? context[first + g % seq] : 0;
        std::vector<char *> outs = call(prog, sf, args, /*useLocal=*/false);
        int64_t next = drawToken(o, lt, outs[0], (used - 1) * vocab, vocab, n);
        free(outs[0]);
        context.push_back(next);
        text += tokenChar(next);
      }
      printSample(o, text);
    }
  }

  // --verify: the unpipelined train step (par-optimizer, same micro-batches)
  // on one rank, from the same initial values and batches.
  int status = 0;
  if (o.verify && rank == 0) {
    FunctionSpec ref =
        loadManifest(o.artifact + "/reference.json", func + "_step");
    if (ref.microBatches != m)
      fail("the reference step accumulates " +
           std::to_string(ref.microBatches) + " micro-batches, the pipeline " +
           std::to_string(m));
    std::vector<std::vector<char>> in;
    for (size_t i = 0; i < ref.inputs.size(); ++i) {
      const TensorSpec &t = ref.inputs[i];
      std::vector<char> buf(std::max<int64_t>(1, t.globalCount() * t.elementSize()));
      for (int64_t g = 0; g < t.globalCount(); ++g)
        storeValue(t, buf.data(), g, generateFor(t, o.seed, i, g));
      in.push_back(std::move(buf));
    }
    Program refProg = loadProgram(o.artifact + "/reference.so", ref.name);
    data.tokensArg = o.tokensArg;
    data.targetsArg = o.targetsArg;
    double worst = 0;
    for (int64_t step = 1; step <= o.steps; ++step) {
      for (size_t a : {data.tokensArg, data.targetsArg})
        if (!o.data.empty())
          data.fill(ref, a, step, in[a].data(), {}, /*local=*/false);
      std::vector<char *> outs = call(refProg, ref, in, /*useLocal=*/false);
      double l = feedBack(ref, outs, in, /*useLocal=*/false);
      for (char *q : outs)
        free(q);
      double e = std::fabs(losses[step - 1] - l) / std::max(std::fabs(l), 1e-30);
      worst = std::isnan(e) || std::isnan(worst) ? NAN : std::max(worst, e);
    }
    double tol = o.rtol >= 0 ? o.rtol : tolerance(ref.outputs[0].dtype);
    bool ok = worst <= tol;
    printf("par-run: verify against the unpipelined step (1 rank)\n"
           "  loss trajectory over %lld steps: max rel error %.3g (tolerance "
           "%.0e rel) %s\n",
           (long long)o.steps, worst, tol, ok ? "OK" : "MISMATCH");
    status = ok ? 0 : 1;
  }
  fflush(stdout);
  par_rt_barrier(ctx);
  par_rt_context_destroy(ctx);
  return status;
}

} // namespace

int main(int argc, char **argv) {
  Options o = parseArgs(argc, argv);
  struct stat st;
  if (stat(o.artifact.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    fail("cannot open artifact directory '" + o.artifact + "'");
  FunctionSpec f = loadManifest(o.artifact + "/sharded.json", o.entry);
  int64_t devices = f.devices();
  if (!insideMPIJob()) {
    if (o.ranks != devices)
      fail("-n " + std::to_string(o.ranks) + " does not match the mesh of '" +
           f.name + "', which has " + std::to_string(devices) + " devices");
    for (auto &[name, path] : o.inputs)
      if (access(path.c_str(), R_OK) != 0)
        fail("cannot open input '" + name + "' file '" + path + "'");
    return launch(o, argc, argv);
  }

  par_rt_options_t ropts;
  par_rt_options_initialize(&ropts);
  ropts.backend = o.backend == "cuda" ? PAR_BACKEND_CUDA : PAR_BACKEND_CPU;
  par_rt_context_t *ctx = nullptr;
  check(par_rt_context_create(&ropts, &argc, &argv, &ctx), ctx,
        "cannot start the " + o.backend + " backend");
  if (ropts.backend == PAR_BACKEND_CUDA)
    fail("the artifact holds CPU code (par-compile has no GPU target yet); "
         "the CUDA backend started, but run this artifact with --backend cpu");
  int64_t rank = par_rt_context_rank(ctx);
  int64_t world = par_rt_context_world_size(ctx);
  if (world != o.ranks)
    fail("started with " + std::to_string(world) + " ranks but -n " +
         std::to_string(o.ranks));
  check(par_rt_context_set_mesh(ctx, f.axisSizes.size(), f.axisSizes.data()),
        ctx, "mesh of '" + f.name + "'");
  if (o.pipeline)
    return runPipeline(ctx, o, rank, world);
  std::vector<int64_t> coords = coordsOf(f, rank);

  // Inputs: local blocks of the global values.
  std::map<size_t, std::vector<char>> given;
  for (auto &[name, path] : o.inputs) {
    size_t k = 0;
    if (name.rfind("arg", 0) != 0 ||
        (k = strtoul(name.c_str() + 3, nullptr, 10)) >= f.inputs.size())
      fail("unknown input '" + name + "' (the program has arg0..arg" +
           std::to_string(f.inputs.size() - 1) + ")");
    given[k] = readNpy(path, f.inputs[k], name);
  }
  std::vector<std::vector<char>> locals;
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    const TensorSpec &t = f.inputs[i];
    std::vector<char> buf(std::max<int64_t>(1, t.localCount() * t.elementSize()));
    // A partial input: one device per partial group holds the value.
    bool holder = true;
    for (const std::string &a : t.partial)
      holder &= coords[f.axisIndex(a)] == 0;
    // The others hold the reduction's neutral value.
    double neutral = t.partialKind == "max"   ? -INFINITY
                     : t.partialKind == "min" ? INFINITY
                                              : 0.0;
    if (t.dtype[0] == 'i' && std::isinf(neutral))
      neutral = neutral < 0 ? (t.dtype == "i32" ? INT32_MIN : (double)INT64_MIN)
                            : (t.dtype == "i32" ? INT32_MAX : (double)INT64_MAX);
    auto it = given.find(i);
    forEachElement(t, blockOffset(f, t, coords), [&](int64_t l, int64_t g) {
      double v = it != given.end() ? loadValue(t, it->second.data(), g)
                                   : generateFor(t, o.seed, i, g);
      storeValue(t, buf.data(), l, holder ? v : neutral);
    });
    locals.push_back(std::move(buf));
  }

  DataLoader data;
  if (!o.data.empty()) {
    data.tokensArg = o.tokensArg;
    data.targetsArg = o.targetsArg;
    data.seed = o.seed;
    data.load(o.data);
    data.check(f);
  }
  auto fillBatch = [&](int64_t step) {
    if (o.data.empty())
      return;
    for (size_t a : {data.tokensArg, data.targetsArg})
      data.fill(f, a, step, locals[a].data(),
                blockOffset(f, f.inputs[a], coords), /*local=*/true);
  };
  fillBatch(1);

  Program prog = loadProgram(o.artifact + "/sharded.so", f.name);
  // Fault injection for tests of the failure path: the named rank crashes
  // just before the program runs, while the others wait in its collectives.
  if (const char *inject = getenv("PAR_RUN_INJECT_CRASH"))
    if (strtoll(inject, nullptr, 10) == rank) {
      fprintf(stderr, "par-run: rank %lld: crashing on purpose "
                      "(PAR_RUN_INJECT_CRASH)\n", (long long)rank);
      fflush(stderr);
      abort();
    }
  // With --repeat, one untimed warm-up run, then K timed runs; statistics
  // are those of the last run.
  std::vector<char *> outs;
  std::vector<double> times;
  par_rt_stats_t stats;
  std::vector<double> losses;
  if (o.steps > 0) {
    checkTrainStep(f);
    TrainLog log(o, rank == 0);
    if (rank == 0 && !o.data.empty()) {
      // The global batch: dp replicas x micro-batches x micro-batch rows.
      int64_t rows = f.inputs[data.tokensArg].global[0];
      printf("par-run: training %s for %lld steps, global batch %lld "
             "sequences of %lld tokens",
             f.name.c_str(), (long long)o.steps, (long long)rows,
             (long long)f.inputs[data.tokensArg].global[1]);
      if (f.microBatches > 1)
        printf(" (%lld micro-batches of %lld, gradients accumulated)",
               (long long)f.microBatches, (long long)(rows / f.microBatches));
      printf("\n");
    }
    for (int64_t step = 1; step <= o.steps; ++step) {
      for (char *p : outs)
        free(p);
      fillBatch(step);
      double t0 = par_rt_now_seconds();
      outs = call(prog, f, locals, /*useLocal=*/true);
      double t = par_rt_now_seconds() - t0;
      double loss = feedBack(f, outs, locals, /*useLocal=*/true);
      times.push_back(t);
      log.step(step, loss, t,
               o.data.empty()
                   ? -1.0
                   : double(f.inputs[data.tokensArg].globalCount()));
    }
    log.finish("par-run: " + f.name + " on " + std::to_string(world) +
               " ranks, loss per step");
    losses = log.losses;
    par_rt_context_stats(ctx, &stats);
  }
  for (int64_t it = 0; o.steps == 0 && it < o.repeat + (o.repeat > 1 ? 1 : 0);
       ++it) {
    for (char *p : outs)
      free(p);
    check(par_rt_barrier(ctx), ctx, "barrier");
    par_rt_context_reset_stats(ctx);
    double t0 = par_rt_now_seconds();
    outs = call(prog, f, locals, /*useLocal=*/true);
    double t = par_rt_now_seconds() - t0;
    par_rt_context_stats(ctx, &stats);
    if (o.repeat == 1 || it > 0)
      times.push_back(t);
  }
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  double elapsed = sorted.front();
  double median = sorted[sorted.size() / 2];

  // Per-rank report.
  double mine[4] = {elapsed, stats.bytes_sent, (double)stats.collectives,
                    median};
  std::vector<double> all(4 * world);
  check(par_rt_gather_world(ctx, mine, sizeof(mine), all.data()), ctx,
        "gathering statistics");
  if (rank == 0) {
    printf("par-run: %s on %lld ranks (mesh", f.name.c_str(), (long long)world);
    for (size_t a = 0; a < f.axisNames.size(); ++a)
      printf(" %s=%lld", f.axisNames[a].c_str(), (long long)f.axisSizes[a]);
    printf(")\n");
    for (int64_t r = 0; r < world; ++r) {
      printf("  rank %lld: %.6f s, %.0f bytes sent in %.0f collectives",
             (long long)r, all[4 * r], all[4 * r + 1], all[4 * r + 2]);
      if (o.repeat > 1)
        printf(" (best of %lld; median %.6f s)", (long long)o.repeat,
               all[4 * r + 3]);
      printf("\n");
    }
  }

  // Gather outputs to rank 0 and assemble the global tensors.
  std::vector<std::vector<char>> globals;
  for (size_t k = 0; k < f.outputs.size(); ++k)
    globals.push_back(assembleGlobal(ctx, f, f.outputs[k], outs[k], rank, world));
  for (char *p : outs)
    free(p);

  int status = 0;
  if (rank == 0) {
    if (!o.outputDir.empty()) {
      mkdir(o.outputDir.c_str(), 0755);
      for (size_t k = 0; k < globals.size(); ++k) {
        std::string path = o.outputDir + "/result" + std::to_string(k) + ".npy";
        writeNpy(path, f.outputs[k], globals[k].data());
        printf("  wrote %s\n", path.c_str());
      }
    }
    if (o.verify) {
      FunctionSpec ref = loadManifest(o.artifact + "/reference.json", f.name);
      if (ref.inputs.size() != f.inputs.size() ||
          ref.outputs.size() != f.outputs.size())
        fail("reference and sharded programs have different signatures");
      std::vector<std::vector<char>> refIn;
      for (size_t i = 0; i < ref.inputs.size(); ++i) {
        const TensorSpec &t = ref.inputs[i];
        std::vector<char> buf(std::max<int64_t>(1, t.globalCount() * t.elementSize()));
        auto it = given.find(i);
        for (int64_t g = 0; g < t.globalCount(); ++g)
          storeValue(t, buf.data(), g,
                     it != given.end() ? loadValue(t, it->second.data(), g)
                                       : generateFor(t, o.seed, i, g));
        refIn.push_back(std::move(buf));
      }
      Program refProg = loadProgram(o.artifact + "/reference.so", ref.name);
      auto refBatch = [&](int64_t step) {
        if (o.data.empty())
          return;
        for (size_t a : {data.tokensArg, data.targetsArg})
          data.fill(ref, a, step, refIn[a].data(), {}, /*local=*/false);
      };
      refBatch(1);
      std::vector<char *> refOut = call(refProg, ref, refIn, /*useLocal=*/false);
      std::vector<double> refLosses;
      if (o.steps > 0)
        refLosses.push_back(loadValue(ref.outputs[0], refOut[0], 0));
      // A train step runs as many steps on the reference, from the same
      // start, and its loss curve is compared too.
      for (int64_t step = 2; step <= o.steps; ++step) {
        feedBack(ref, refOut, refIn, /*useLocal=*/false);
        for (char *p : refOut)
          free(p);
        refBatch(step);
        refOut = call(refProg, ref, refIn, /*useLocal=*/false);
        refLosses.push_back(loadValue(ref.outputs[0], refOut[0], 0));
      }
      if (o.steps > 0) {
        double worst = 0;
        for (size_t i = 0; i < refLosses.size() && i < losses.size(); ++i)
          worst = std::max(worst, std::fabs(losses[i] - refLosses[i]) /
                                      std::max(std::fabs(refLosses[i]), 1e-30));
        if (std::isnan(worst) ||
            std::any_of(losses.begin(), losses.end(),
                        [](double l) { return std::isnan(l); }))
          worst = NAN;
        double tol = o.rtol >= 0 ? o.rtol : tolerance(ref.outputs[0].dtype);
        bool ok = worst <= tol;
        printf("  loss trajectory over %lld steps: max rel error %.3g "
               "(tolerance %.0e rel) %s\n",
               (long long)o.steps, worst, tol, ok ? "OK" : "MISMATCH");
        if (!ok)
          status = 1;
      }
      printf("par-run: verify against the unsharded program (1 rank)\n");
      for (size_t k = 0; k < ref.outputs.size(); ++k) {
        const TensorSpec &t = ref.outputs[k];
        double maxAbs = 0, maxRef = 0;
        bool nan = false;
        for (int64_t i = 0; i < t.globalCount(); ++i) {
          double a = loadValue(t, globals[k].data(), i);
          double b = loadValue(t, refOut[k], i);
          // A NaN anywhere is a failure, even where both runs agree on it.
          nan |= std::isnan(a) || std::isnan(b);
          if (!std::isnan(a) && !std::isnan(b))
            maxAbs = std::max(maxAbs, std::fabs(a - b));
          maxRef = std::max(maxRef, std::fabs(b));
        }
        if (nan)
          maxAbs = NAN;
        double rel = maxRef > 0 ? maxAbs / maxRef : maxAbs;
        double tol = o.rtol >= 0 ? o.rtol : tolerance(t.dtype);
        bool ok = !nan && rel <= tol;
        // After many training steps, parameters drift apart by rounding
        // (Adam amplifies it); the loss trajectory is what is checked then.
        if (o.steps > 1) {
          printf("  result%zu %s after %lld steps: max abs error %.3g, max "
                 "rel error %.3g (informational)\n",
                 k, t.dtype.c_str(), (long long)o.steps, maxAbs, rel);
        } else {
          printf("  result%zu %s: max abs error %.3g, max rel error %.3g "
                 "(tolerance %.0e rel) %s\n",
                 k, t.dtype.c_str(), maxAbs, rel, tol, ok ? "OK" : "MISMATCH");
          if (!ok)
            status = 1;
        }
        free(refOut[k]);
      }
    }
  }
  if (o.sample > 0) {
    std::string text = sampleText(ctx, o, f, locals, data.tokensArg,
                                  data.targetsArg, rank, world);
    if (rank == 0)
      printSample(o, text);
  }
  fflush(stdout);
  par_rt_barrier(ctx);
  par_rt_context_destroy(ctx);
  return status;
}

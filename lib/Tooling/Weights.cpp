//===- Weights.cpp - Named parameters in and out of .safetensors ----------===//
//
// Loading checks, per named input, the file's dtype and shape against the
// manifest's global ones; the tensors of the file nobody asked for are
// counted (a state_dict holds buffers and tied names par does not take as
// inputs). Saving writes one entry per name, so tied names share data.
//
//===----------------------------------------------------------------------===//

#include "par/Tooling/Weights.h"

#include "par/Tooling/Diagnostics.h"

#include <cstdio>

namespace par::tooling {

namespace {

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

} // namespace

WeightLoader::WeightLoader(const std::string &path) {
  std::string error;
  if (!file.open(path, error))
    fatal("--load-weights: " + error);
}

Buffer WeightLoader::load(const Tensor &t, const std::string &label,
                          const std::string &fn) {
  const SafetensorsEntry *e = file.find(t.name);
  for (size_t k = 0; !e && k < t.aliases.size(); ++k)
    e = file.find(t.aliases[k]);
  std::string where = "--load-weights '" + file.path() + "': ";
  if (!e) {
    std::string names = "'" + t.name + "'";
    for (const std::string &a : t.aliases)
      names += " or '" + a + "'";
    fatal(where + "no tensor " + names + " for " + label + " of '" + fn +
          "'");
  }
  if (!e->supported || e->dtype != t.dtype || e->shape != t.global)
    fatal(where + "tensor '" + e->name + "' is " + e->dtypeName + " " +
          shapeText(e->shape) + ", but " + label + " of '" + fn + "' is " +
          safetensorsDtypeName(t.dtype) + " " + shapeText(t.global));
  Buffer data;
  std::string error;
  if (!file.read(*e, data, error))
    fatal("--load-weights: " + error);
  used.insert(t.name);
  used.insert(t.aliases.begin(), t.aliases.end());
  ++loadedCount;
  return data;
}

std::vector<std::string> WeightLoader::unused() const {
  std::vector<std::string> out;
  for (const SafetensorsEntry &e : file.entries())
    if (!used.count(e.name))
      out.push_back(e.name);
  return out;
}

void WeightLoader::report() const {
  std::vector<std::string> rest = unused();
  printf("%s: loaded %lld tensors from %s", toolName().c_str(),
         (long long)loadedCount, file.path().c_str());
  if (!rest.empty()) {
    printf(" (%zu in the file unused:", rest.size());
    for (size_t i = 0; i < rest.size() && i < 4; ++i)
      printf(" %s", rest[i].c_str());
    printf("%s)", rest.size() > 4 ? " ..." : "");
  }
  printf("\n");
}

std::map<size_t, Buffer> loadWeights(const Function &f,
                                     const std::string &path, bool print) {
  std::map<size_t, Buffer> out;
  WeightLoader loader(path);
  for (size_t i = 0; i < f.inputs.size(); ++i)
    if (!f.inputs[i].name.empty())
      out[i] = loader.load(f.inputs[i], inputLabel(f.inputs, i), f.name);
  if (out.empty())
    fatal("--load-weights: no input of '" + f.name + "' has a name (the "
          "frontend's par.name, which par-import puts on parameters)");
  if (print)
    loader.report();
  return out;
}

void saveWeights(const std::string &path, const std::string &fn,
                 const std::vector<NamedValue> &values) {
  if (values.empty())
    fatal("--save-weights: no input of '" + fn + "' has a name (the "
          "frontend's par.name, which par-import puts on parameters)");
  std::vector<SafetensorsTensor> tensors;
  for (const NamedValue &v : values) {
    tensors.push_back({v.tensor->name, v.tensor->dtype, v.tensor->global,
                       v.global->data()});
    for (const std::string &a : v.tensor->aliases)
      tensors.push_back({a, v.tensor->dtype, v.tensor->global,
                         v.global->data()});
  }
  std::string error;
  if (!writeSafetensors(path, tensors, {{"format", "pt"}}, error))
    fatal("--save-weights: " + error);
  printf("%s: saved %zu parameters (%zu tensors with their aliases) to %s\n",
         toolName().c_str(), values.size(), tensors.size(), path.c_str());
}

} // namespace par::tooling

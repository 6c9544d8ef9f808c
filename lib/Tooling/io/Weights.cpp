//===- Weights.cpp - Named parameters in and out of .safetensors ----------===//
//
// Loading checks, per named input, the file's dtype and shape against the
// manifest's global ones; the tensors of the file nobody asked for are
// counted (a state_dict holds buffers and tied names par does not take as
// inputs). Saving writes one entry per name, so tied names share data.
// A segment of a fused parameter (par.slice: par-import splits a fused
// q|k|v projection per segment) loads from its slice of the fused tensor,
// and the segments are saved back as the fused tensor, under its name: the
// files keep the module's own names and shapes. A slice that reaches past
// its tensor (par.slice's extent: a vocabulary padded to a multiple of tp)
// loads zeros there, and the padding is not saved.
//
//===----------------------------------------------------------------------===//

#include "par/Tooling/Weights.h"

#include "par/Tooling/Diagnostics.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>

namespace par::tooling {

namespace {

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t product(const std::vector<int64_t> &shape, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t d = from; d < to; ++d)
    n *= shape[d];
  return n;
}

/// Copies between a row-major tensor of shape `whole` and its slice `part`
/// (the same shape but in dimension `dim`, which starts at `offset` in
/// `whole`): into `part` when `extract`, else into `whole`.
void copySlice(char *whole, const std::vector<int64_t> &wholeShape,
               char *part, const std::vector<int64_t> &partShape, size_t dim,
               int64_t offset, int64_t elementSize, bool extract) {
  int64_t outer = product(wholeShape, 0, dim);
  int64_t inner = product(wholeShape, dim + 1, wholeShape.size()) *
                  elementSize;
  int64_t wholeRow = wholeShape[dim] * inner, partRow = partShape[dim] * inner;
  for (int64_t o = 0; o < outer; ++o) {
    char *w = whole + o * wholeRow + offset * inner;
    char *p = part + o * partRow;
    if (extract)
      memcpy(p, w, partRow);
    else
      memcpy(w, p, partRow);
  }
}

/// Whether `part` is the slice [offset, offset + part[dim]) of dimension
/// `dim` of `whole`, or with `extent` > 0, reaches past its end `extent`.
bool isSliceOf(const std::vector<int64_t> &part,
               const std::vector<int64_t> &whole, int64_t dim,
               int64_t offset, int64_t extent) {
  if (part.size() != whole.size() || dim < 0 || dim >= (int64_t)part.size())
    return false;
  for (size_t d = 0; d < part.size(); ++d)
    if ((int64_t)d != dim && part[d] != whole[d])
      return false;
  if (extent > 0)
    return whole[dim] == extent && offset < extent &&
           offset + part[dim] > extent;
  return offset >= 0 && offset + part[dim] <= whole[dim];
}

/// `shape` with dimension `dim` set to `size`.
std::vector<int64_t> withDim(std::vector<int64_t> shape, size_t dim,
                             int64_t size) {
  shape[dim] = size;
  return shape;
}

} // namespace

WeightLoader::WeightLoader(const std::string &path) {
  std::string error;
  if (!file.open(path, error))
    fatal("--load-weights: " + error);
}

Buffer WeightLoader::load(const Tensor &t, const std::string &label,
                          const std::string &fn) {
  if (!t.sliceOf.empty())
    return loadSlice(t, label, fn);
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

Buffer WeightLoader::loadSlice(const Tensor &t, const std::string &label,
                               const std::string &fn) {
  std::string where = "--load-weights '" + file.path() + "': ";
  const SafetensorsEntry *e = file.find(t.sliceOf);
  // A padded tied table may be stored under one of its other names.
  for (size_t k = 0; !e && t.sliceOf == t.name && k < t.aliases.size(); ++k)
    e = file.find(t.aliases[k]);
  std::string what =
      t.sliceExtent ? "padded from " + std::to_string(t.sliceExtent) +
                          " to " + std::to_string(t.global[t.sliceDim])
                    : "a segment of it";
  if (!e)
    fatal(where + "no tensor '" + t.sliceOf + "' for " + label + " of '" +
          fn + "' (" + what + ": dimension " + std::to_string(t.sliceDim) +
          " from " + std::to_string(t.sliceOffset) + ")");
  if (!e->supported || e->dtype != t.dtype ||
      !isSliceOf(t.global, e->shape, t.sliceDim, t.sliceOffset,
                 t.sliceExtent))
    fatal(where + "tensor '" + e->name + "' is " + e->dtypeName + " " +
          shapeText(e->shape) + ", but " + label + " of '" + fn + "' is " +
          safetensorsDtypeName(t.dtype) + " " + shapeText(t.global) +
          " from " + std::to_string(t.sliceOffset) + " in its dimension " +
          std::to_string(t.sliceDim) +
          (t.sliceExtent ? " (" + what + ")" : ""));
  Buffer whole, data(t.globalBytes());
  std::string error;
  if (!file.read(*e, whole, error))
    fatal("--load-weights: " + error);
  // The part inside the tensor; padding past it stays zero.
  std::vector<int64_t> inside = t.global;
  if (t.sliceExtent)
    inside[t.sliceDim] = t.sliceExtent - t.sliceOffset;
  Buffer part(product(inside, 0, inside.size()) * t.elementSize);
  copySlice(whole.data(), e->shape, part.data(), inside, t.sliceDim,
            t.sliceOffset, t.elementSize, /*extract=*/true);
  copySlice(data.data(), t.global, part.data(), inside, t.sliceDim, 0,
            t.elementSize, /*extract=*/false);
  used.insert(t.name);
  used.insert(t.sliceOf);
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
  // The segments of each fused parameter, assembled into it.
  std::map<std::string, std::vector<const NamedValue *>> fused;
  for (const NamedValue &v : values)
    if (!v.tensor->sliceOf.empty())
      fused[v.tensor->sliceOf].push_back(&v);
  std::vector<std::unique_ptr<Buffer>> wholes;
  for (const auto &[name, parts] : fused) {
    const Tensor &first = *parts.front()->tensor;
    std::vector<int64_t> shape = first.global;
    size_t dim = first.sliceDim;
    int64_t size = 0, covered = 0, extent = 0;
    for (const NamedValue *p : parts) {
      const Tensor &t = *p->tensor;
      if ((size_t)t.sliceDim != dim || t.dtype != first.dtype ||
          t.global.size() != shape.size())
        fatal("--save-weights: the segments of '" + name + "' ('" +
              first.name + "', '" + t.name + "') do not tile it");
      size = std::max(size, t.sliceOffset + t.global[dim]);
      covered += t.global[dim];
      extent = std::max(extent, t.sliceExtent);
    }
    if (covered != size)
      fatal("--save-weights: the segments of '" + name + "' cover " +
            std::to_string(covered) + " of its " + std::to_string(size) +
            " in dimension " + std::to_string(dim));
    // Assembled with the padding, saved without it (the leading part).
    shape[dim] = size;
    wholes.push_back(std::make_unique<Buffer>(product(shape, 0, shape.size()) *
                                              first.elementSize));
    for (const NamedValue *p : parts)
      copySlice(wholes.back()->data(), shape,
                const_cast<char *>(p->global->data()), p->tensor->global, dim,
                p->tensor->sliceOffset, first.elementSize, /*extract=*/false);
    if (extent) {
      std::vector<int64_t> kept = withDim(shape, dim, extent);
      auto trimmed = std::make_unique<Buffer>(product(kept, 0, kept.size()) *
                                              first.elementSize);
      copySlice(wholes.back()->data(), shape, trimmed->data(), kept, dim, 0,
                first.elementSize, /*extract=*/true);
      wholes.push_back(std::move(trimmed));
      shape = kept;
    }
    tensors.push_back({name, first.dtype, shape, wholes.back()->data()});
    // A padded tied table keeps its other names.
    if (parts.size() == 1 && first.name == name)
      for (const std::string &a : first.aliases)
        tensors.push_back({a, first.dtype, shape, wholes.back()->data()});
  }
  for (const NamedValue &v : values) {
    if (!v.tensor->sliceOf.empty())
      continue;
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

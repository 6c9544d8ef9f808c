//===- Weights.h - Named parameters in and out of .safetensors --*- C++ -*-===//
//
// par-run's --load-weights and --save-weights: the inputs of a function
// that carry a PyTorch name (the manifest's "name", from par.name) are the
// model's parameters; a .safetensors file (Safetensors.h) holds them by
// name, global (unsharded) and row-major, as torch's state_dict does. A
// tied parameter is one input with other names ("aliases"): it loads from
// whichever of its names the file has, and is saved under every one of
// them (the same data), so that `model.load_state_dict(load_file(F))`
// loads strictly. Every failure is fatal with a message naming the file
// and the tensor.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TOOLING_WEIGHTS_H
#define PAR_TOOLING_WEIGHTS_H

#include "par/Tooling/Function.h"
#include "par/Tooling/Safetensors.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace par::tooling {

/// A .safetensors file the named inputs of one or more functions load
/// from.
class WeightLoader {
public:
  /// Opens and checks `path` (fatal if it is not a readable safetensors
  /// file).
  explicit WeightLoader(const std::string &path);
  /// The global tensor of named input `t` (`label` is how messages name
  /// it, e.g. "arg2 (wte.weight)", of function `fn`): the file's tensor of
  /// its name or of one of its aliases, with its dtype and global shape;
  /// for a segment of a fused parameter (Tensor::sliceOf), its slice of the
  /// fused tensor.
  Buffer load(const Tensor &t, const std::string &label,
              const std::string &fn);
  /// How many tensors were loaded, and the file's tensors no load used
  /// (by name or as an alias of a loaded tensor).
  int64_t loaded() const { return loadedCount; }
  std::vector<std::string> unused() const;
  /// Prints "par-run: loaded N tensors from FILE (M in the file unused:
  /// ...)".
  void report() const;

private:
  Buffer loadSlice(const Tensor &t, const std::string &label,
                   const std::string &fn);
  SafetensorsReader file;
  std::set<std::string> used;
  int64_t loadedCount = 0;
};

/// The global tensors of `f`'s named inputs from `path`, by input index;
/// fatal if `f` has none. Rank 0 (`print`) reports what was loaded.
std::map<size_t, Buffer> loadWeights(const Function &f,
                                     const std::string &path, bool print);

/// A named parameter's global value, to be saved.
struct NamedValue {
  const Tensor *tensor;
  const Buffer *global;
};

/// Writes each value under its name and aliases to `path` (atomically),
/// the segments of a fused parameter (Tensor::sliceOf) as the fused tensor
/// under its name;
/// fatal if there is none (`fn` names the function in that message) or
/// the write fails. Prints what was written.
void saveWeights(const std::string &path, const std::string &fn,
                 const std::vector<NamedValue> &values);

} // namespace par::tooling

#endif // PAR_TOOLING_WEIGHTS_H

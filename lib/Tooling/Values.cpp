//===- Values.cpp - Generated and given input values ----------------------===//
//
// The generator is a SplitMix64-style mix of the three counters; its top
// 24 bits give the value.
//
//===----------------------------------------------------------------------===//

#include "par/Tooling/Values.h"
#include "par/Target/Manifest/ManifestSchema.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace par::tooling {

double generate(uint64_t seed, uint64_t tensor, uint64_t index) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull +
               (tensor + 1) * 0xBF58476D1CE4E5B9ull +
               index * 0x94D049BB133111EBull;
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return (double)(x >> 40) / (double)(1ull << 24) * 2.0 - 1.0; // [-1, 1)
}

double generateFor(const Tensor &t, uint64_t seed, uint64_t tensor,
                   uint64_t index) {
  // The program's own initialiser (par.init), if it names one.
  namespace init = ::par::manifest::init;
  if (t.init == init::kZeros)
    return 0.0;
  if (t.init == init::kOnes)
    return 1.0;
  const size_t prefix = sizeof(init::kUniformPrefix) - 1;
  if (t.init.compare(0, prefix, init::kUniformPrefix) == 0)
    return generate(seed, tensor, index) *
           strtod(t.init.c_str() + prefix, nullptr);
  const size_t fill = sizeof(init::kFillPrefix) - 1;
  if (t.init.compare(0, fill, init::kFillPrefix) == 0)
    return strtod(t.init.c_str() + fill, nullptr);
  double v = generate(seed, tensor, index);
  // The frontend's token ids and targets (par.data, par.vocab): in
  // [0, vocab).
  if (!t.isFloat && t.vocab > 0 &&
      (t.role == ::par::manifest::key::kRoleTokens ||
       t.role == ::par::manifest::key::kRoleTargets))
    return std::min<double>(std::floor((v + 1) / 2 * t.vocab), t.vocab - 1);
  return t.isFloat ? v : std::floor(v * 8);
}

Buffer generateGlobal(const Tensor &t, uint64_t seed, uint64_t tensor,
                      const Tensor *values,
                      const std::function<int64_t(int64_t)> &index) {
  Buffer buf = zeroBuffer(t.globalBytes());
  const Tensor &v = values ? *values : t;
  for (int64_t g = 0; g < t.globalCount; ++g)
    par_dtype_store(t.dtype, buf.data(), g,
                    generateFor(v, seed, tensor, index ? index(g) : g));
  return buf;
}

std::vector<Buffer> globalInputs(const Function &f, uint64_t seed,
                                 const std::map<size_t, Buffer> &given) {
  std::vector<Buffer> globals;
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    auto it = given.find(i);
    globals.push_back(it != given.end() ? it->second
                                        : generateGlobal(f.inputs[i], seed, i));
  }
  return globals;
}

std::vector<Buffer> localInputs(const Function &f,
                                const std::vector<Buffer> &globals) {
  std::vector<Buffer> locals;
  for (size_t i = 0; i < f.inputs.size(); ++i)
    locals.push_back(f.scatter(PAR_INPUT, i, globals[i]));
  return locals;
}

} // namespace par::tooling

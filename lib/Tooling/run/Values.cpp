//===- Values.cpp - Generated and given input values ----------------------===//
//
// The generator is a SplitMix64-style mix of the three counters; its top
// 24 bits give the value.
//
//===----------------------------------------------------------------------===//

#include "par/Tooling/Values.h"
#include "par/Manifest/Schema.h"

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

namespace {

/// A tensor's initialiser, read once (not per element).
struct Initializer {
  enum Kind { Fill, Uniform, Tokens, Float, Integer } kind;
  double value = 0; // Fill's value, Uniform's scale, Tokens' vocabulary

  explicit Initializer(const Tensor &t) {
    namespace init = ::par::manifest::init;
    const size_t prefix = sizeof(init::kUniformPrefix) - 1;
    const size_t fill = sizeof(init::kFillPrefix) - 1;
    if (t.init == init::kZeros) {
      kind = Fill;
    } else if (t.init == init::kOnes) {
      kind = Fill;
      value = 1.0;
    } else if (t.init.compare(0, prefix, init::kUniformPrefix) == 0) {
      kind = Uniform;
      value = strtod(t.init.c_str() + prefix, nullptr);
    } else if (t.init.compare(0, fill, init::kFillPrefix) == 0) {
      kind = Fill;
      value = strtod(t.init.c_str() + fill, nullptr);
    } else if (!t.isFloat && t.vocab > 0 &&
               (t.role == ::par::manifest::key::kRoleTokens ||
                t.role == ::par::manifest::key::kRoleTargets)) {
      // The frontend's token ids and targets (par.data, par.vocab): in
      // [0, vocab).
      kind = Tokens;
      value = double(t.vocab);
    } else {
      kind = t.isFloat ? Float : Integer;
    }
  }

  double operator()(uint64_t seed, uint64_t tensor, uint64_t index) const {
    switch (kind) {
    case Fill:
      return value;
    case Uniform:
      return generate(seed, tensor, index) * value;
    case Tokens:
      return std::min<double>(
          std::floor((generate(seed, tensor, index) + 1) / 2 * value),
          value - 1);
    case Float:
      return generate(seed, tensor, index);
    case Integer:
      return std::floor(generate(seed, tensor, index) * 8);
    }
    return 0;
  }
};

} // namespace

double generateFor(const Tensor &t, uint64_t seed, uint64_t tensor,
                   uint64_t index) {
  return Initializer(t)(seed, tensor, index);
}

Buffer generateGlobal(const Tensor &t, uint64_t seed, uint64_t tensor,
                      const Tensor *values,
                      const std::function<int64_t(int64_t)> &index) {
  Buffer buf = zeroBuffer(t.globalBytes());
  Initializer init(values ? *values : t);
  if (init.kind == Initializer::Fill && init.value == 0)
    return buf; // zeroBuffer's zeros
  if (t.dtype == PAR_F32 && !index) {
    float *out = reinterpret_cast<float *>(buf.data());
    for (int64_t g = 0; g < t.globalCount; ++g)
      out[g] = float(init(seed, tensor, g));
    return buf;
  }
  for (int64_t g = 0; g < t.globalCount; ++g)
    par_dtype_store(t.dtype, buf.data(), g,
                    init(seed, tensor, index ? index(g) : g));
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

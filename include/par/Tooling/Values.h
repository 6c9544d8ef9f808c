//===- Values.h - Generated and given input values --------------*- C++ -*-===//
//
// par-run's inputs come from a counter-based generator: a value depends
// only on (seed, tensor, global element index), never on the layout, so
// every sharding of a program (and its unsharded reference) sees the same
// global values. A tensor with a par.init initialiser takes it instead:
// "zeros", "ones" or "uniform:<scale>" (the generator's value times scale).
// Other floats are uniform in [-1, 1), integers small in [-8, 8), but for
// the frontend's tokens and targets (roles "tokens"/"targets" with a
// vocab: par.data, par.vocab), which are uniform in [0, vocab).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TOOLING_VALUES_H
#define PAR_TOOLING_VALUES_H

#include "par/Tooling/Function.h"

#include <cstdint>
#include <functional>
#include <map>

namespace par::tooling {

/// The raw generator: uniform in [-1, 1).
double generate(uint64_t seed, uint64_t tensor, uint64_t index);

/// The generated value of element `index` of tensor number `tensor` of
/// type and initialiser `t`.
double generateFor(const Tensor &t, uint64_t seed, uint64_t tensor,
                   uint64_t index);

/// The global tensor `t` of generated values (tensor number `tensor`).
/// With `index`, element g takes the value of element index(g) of `values`
/// (a tensor whose generated values `t` views, e.g. one micro-batch of a
/// larger batch); without, `values` is `t` and index(g) = g.
Buffer generateGlobal(const Tensor &t, uint64_t seed, uint64_t tensor,
                      const Tensor *values = nullptr,
                      const std::function<int64_t(int64_t)> &index = {});

/// The global value of every input of `f`: the given tensor (by argument
/// index) where there is one, else the generator's.
std::vector<Buffer> globalInputs(const Function &f, uint64_t seed,
                                 const std::map<size_t, Buffer> &given);

/// This rank's blocks of global tensors, one per input of `f`.
std::vector<Buffer> localInputs(const Function &f,
                                const std::vector<Buffer> &globals);

} // namespace par::tooling

#endif // PAR_TOOLING_VALUES_H

//===- Tensor.cpp - The one description of a function's tensor ------------===//

#include "par/Manifest/Tensor.h"

#include "par/Manifest/Schema.h"

#include <algorithm>

namespace par::manifest {

void Tensor::setDtype(par_dtype_t d) {
  dtype = d;
  if (const par_dtype_info_t *info = par_dtype_info(d)) {
    dtypeName = info->name;
    elementSize = info->element_size;
    isFloat = info->is_float;
  }
}

bool Tensor::usesAxis(int64_t a) const {
  for (const std::vector<int64_t> &d : dims)
    if (std::count(d.begin(), d.end(), a))
      return true;
  return std::count(partial.begin(), partial.end(), a) > 0;
}

bool Tensor::errorFeedback() const { return role == key::kRoleErrorFeedback; }

bool Tensor::compressionState() const {
  return errorFeedback() || role == key::kRoleCompressionStep;
}

bool Tensor::sameLayout(const Tensor &o) const {
  return dtype == o.dtype && local == o.local && dims == o.dims &&
         partial == o.partial;
}

bool Tensor::replicated() const {
  for (const std::vector<int64_t> &d : dims)
    if (!d.empty())
      return false;
  return partial.empty();
}

} // namespace par::manifest

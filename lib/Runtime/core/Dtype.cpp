//===- Dtype.cpp - The dtype table, exported ------------------------------===//
//
// par_dtype_info and friends (par_types.h) over the one table in
// common/Dtype.h, for the session, the tooling and any other driver.
//
//===----------------------------------------------------------------------===//

#include "Context.h"
#include "../common/Dtype.h"

#include <cstring>

using par::rt::kDtypeTable;

namespace {
constexpr int64_t kNumDtypes = sizeof(kDtypeTable) / sizeof(kDtypeTable[0]);
} // namespace

PAR_RT_EXPORT const par_dtype_info_t *par_dtype_info(par_dtype_t dtype) {
  return par::rt::findDtype(dtype);
}

PAR_RT_EXPORT int64_t par_dtype_count(void) { return kNumDtypes; }

PAR_RT_EXPORT const par_dtype_info_t *par_dtype_info_at(int64_t i) {
  return i >= 0 && i < kNumDtypes ? &kDtypeTable[i] : nullptr;
}

PAR_RT_EXPORT par_status_t par_dtype_from_name(const char *name,
                                               par_dtype_t *out_dtype) {
  for (const par_dtype_info_t &d : kDtypeTable)
    if (name && out_dtype && std::strcmp(d.name, name) == 0) {
      *out_dtype = d.dtype;
      return PAR_OK;
    }
  return PAR_ERR_INVALID_ARGUMENT;
}

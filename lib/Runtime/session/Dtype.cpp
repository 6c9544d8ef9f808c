//===- Dtype.cpp - Element loads and stores of the session API -----------===//
//
// Element loads and stores through double for every par_dtype_t of the
// runtime's one table (par_dtype_info, par_types.h), with the runtime's
// f16/bf16 conversions (common/Float16.h: round to nearest even).
//
//===----------------------------------------------------------------------===//

#include "par/Runtime/par_session.h"
#include "../common/Float16.h"

#include <cmath>
#include <cstring>

namespace {

template <typename T> T loadAs(const void *base, int64_t i) {
  T v;
  memcpy(&v, (const char *)base + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T> void storeAs(void *base, int64_t i, T v) {
  memcpy((char *)base + i * sizeof(T), &v, sizeof(T));
}

} // namespace

extern "C" {

double par_dtype_load(par_dtype_t dtype, const void *base, int64_t i) {
  switch (dtype) {
  case PAR_F64: return loadAs<double>(base, i);
  case PAR_F32: return loadAs<float>(base, i);
  case PAR_F16: return par::rt::halfToFloat(loadAs<uint16_t>(base, i));
  case PAR_BF16: return par::rt::bf16ToFloat(loadAs<uint16_t>(base, i));
  case PAR_I64: return (double)loadAs<int64_t>(base, i);
  case PAR_I32: return loadAs<int32_t>(base, i);
  case PAR_I8: return loadAs<int8_t>(base, i);
  case PAR_I1: return loadAs<uint8_t>(base, i) ? 1.0 : 0.0;
  }
  return 0;
}

void par_dtype_store(par_dtype_t dtype, void *base, int64_t i, double v) {
  switch (dtype) {
  case PAR_F64: storeAs<double>(base, i, v); return;
  case PAR_F32: storeAs<float>(base, i, (float)v); return;
  case PAR_F16:
    storeAs<uint16_t>(base, i, par::rt::floatToHalf((float)v));
    return;
  case PAR_BF16:
    storeAs<uint16_t>(base, i, par::rt::floatToBf16((float)v));
    return;
  case PAR_I64: storeAs<int64_t>(base, i, (int64_t)std::llround(v)); return;
  case PAR_I32: storeAs<int32_t>(base, i, (int32_t)std::llround(v)); return;
  case PAR_I8: storeAs<int8_t>(base, i, (int8_t)std::llround(v)); return;
  case PAR_I1: storeAs<uint8_t>(base, i, v != 0 ? 1 : 0); return;
  }
}

} // extern "C"

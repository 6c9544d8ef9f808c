//===- Dtype.cpp - The element-type table of the session API --------------===//
//
// One table for every par_dtype_t: its manifest name, size in memory and
// .npy descriptor (par_session.h states the i1 and bf16 conventions), plus
// element loads and stores through double with the f16/bf16 conversions
// (round to nearest even). The tooling and the session's layout code use
// only this table.
//
//===----------------------------------------------------------------------===//

#include "par/Runtime/par_session.h"

#include <cmath>
#include <cstring>

namespace {

const par_dtype_info_t kDtypes[] = {
    {PAR_F64, "f64", 8, 1, "<f8"},  {PAR_F32, "f32", 4, 1, "<f4"},
    {PAR_F16, "f16", 2, 1, "<f2"},  {PAR_BF16, "bf16", 2, 1, "<u2"},
    {PAR_I64, "i64", 8, 0, "<i8"},  {PAR_I32, "i32", 4, 0, "<i4"},
    {PAR_I8, "i8", 1, 0, "|i1"},    {PAR_I1, "i1", 1, 0, "|b1"},
};
constexpr int64_t kNumDtypes = sizeof(kDtypes) / sizeof(kDtypes[0]);

uint32_t floatBits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

float bitsFloat(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

float bf16ToFloat(uint16_t h) { return bitsFloat((uint32_t)h << 16); }

uint16_t floatToBf16(float f) {
  uint32_t u = floatBits(f);
  if (std::isnan(f))
    return (uint16_t)((u >> 16) | 0x40); // stay a (quiet) NaN
  u += 0x7FFF + ((u >> 16) & 1);         // round to nearest even
  return (uint16_t)(u >> 16);
}

float f16ToFloat(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  int32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  if (exp == 0x1F) // inf or NaN
    return bitsFloat(sign | 0x7F800000 | mant << 13);
  if (exp == 0) { // zero or subnormal: mant * 2^-24
    float v = std::ldexp((float)mant, -24);
    return sign ? -v : v;
  }
  return bitsFloat(sign | (uint32_t)(exp - 15 + 127) << 23 | mant << 13);
}

uint16_t floatToF16(float f) {
  uint32_t u = floatBits(f);
  uint16_t sign = (u >> 16) & 0x8000;
  float a = std::fabs(f);
  if (std::isnan(f))
    return sign | 0x7E00;
  if (a >= 65520.0f) // rounds to infinity
    return sign | 0x7C00;
  if (a < std::ldexp(1.0f, -14)) { // subnormal: units of 2^-24
    float units = std::nearbyint(a * std::ldexp(1.0f, 24));
    return sign | (uint16_t)units; // 1024 units is the smallest normal
  }
  uint32_t bits = floatBits(a);
  uint32_t exp = (bits >> 23) - 127 + 15;
  uint32_t mant = bits & 0x7FFFFF;
  uint32_t h = exp << 10 | mant >> 13;
  uint32_t rest = mant & 0x1FFF; // round to nearest even
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
    ++h; // a carry into the exponent is still right
  return sign | (uint16_t)h;
}

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

const par_dtype_info_t *par_dtype_info(par_dtype_t dtype) {
  for (const par_dtype_info_t &d : kDtypes)
    if (d.dtype == dtype)
      return &d;
  return nullptr;
}

int64_t par_dtype_count(void) { return kNumDtypes; }

const par_dtype_info_t *par_dtype_info_at(int64_t i) {
  return i >= 0 && i < kNumDtypes ? &kDtypes[i] : nullptr;
}

par_status_t par_dtype_from_name(const char *name, par_dtype_t *out_dtype) {
  for (const par_dtype_info_t &d : kDtypes)
    if (name && strcmp(d.name, name) == 0) {
      *out_dtype = d.dtype;
      return PAR_OK;
    }
  return PAR_ERR_INVALID_ARGUMENT;
}

double par_dtype_load(par_dtype_t dtype, const void *base, int64_t i) {
  switch (dtype) {
  case PAR_F64: return loadAs<double>(base, i);
  case PAR_F32: return loadAs<float>(base, i);
  case PAR_F16: return f16ToFloat(loadAs<uint16_t>(base, i));
  case PAR_BF16: return bf16ToFloat(loadAs<uint16_t>(base, i));
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
  case PAR_F16: storeAs<uint16_t>(base, i, floatToF16((float)v)); return;
  case PAR_BF16: storeAs<uint16_t>(base, i, floatToBf16((float)v)); return;
  case PAR_I64: storeAs<int64_t>(base, i, (int64_t)std::llround(v)); return;
  case PAR_I32: storeAs<int32_t>(base, i, (int32_t)std::llround(v)); return;
  case PAR_I8: storeAs<int8_t>(base, i, (int8_t)std::llround(v)); return;
  case PAR_I1: storeAs<uint8_t>(base, i, v != 0 ? 1 : 0); return;
  }
}

} // extern "C"

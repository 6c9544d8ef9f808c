//===- Float16.h - f16/bf16 <-> f32 conversions -----------------*- C++ -*-===//
//
// The runtime reduces f16 and bf16 by widening to f32, reducing, and rounding
// back (MPI has no 16-bit float types, and summing in f32 is also more
// accurate). The conversions are written here rather than taken from a
// compiler extension (_Float16, __bf16) so that they behave the same with any
// host compiler: round-to-nearest-even, overflow to infinity, gradual
// underflow to subnormals, NaN stays NaN (quieted).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_COMMON_FLOAT16_H
#define PAR_RUNTIME_COMMON_FLOAT16_H

#include <cstdint>
#include <cstring>

namespace par::rt {

inline uint32_t floatBits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  return x;
}

inline float bitsToFloat(uint32_t x) {
  float f;
  std::memcpy(&f, &x, sizeof(f));
  return f;
}

/// IEEE binary16 -> binary32 (exact).
inline float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exactly representable in f32.
    float v = float(mant) * (1.0f / 16777216.0f);
    return bitsToFloat(floatBits(v) | sign);
  }
  if (exp == 31) // Inf or NaN; the payload moves to the top of f32's.
    return bitsToFloat(sign | 0x7F800000u | (mant << 13));
  return bitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
}

/// binary32 -> binary16, round to nearest, ties to even.
inline uint16_t floatToHalf(float f) {
  uint32_t x = floatBits(f);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t absx = x & 0x7FFFFFFFu;
  if (absx >= 0x7F800000u) // Inf, or NaN (forced quiet so it stays NaN).
    return uint16_t(sign | 0x7C00 |
                    (absx > 0x7F800000u ? 0x200 | ((absx >> 13) & 0x3FF) : 0));
  // 65520 is halfway between the largest half (65504, odd mantissa) and
  // 2^16, so it and everything above round to infinity.
  if (absx >= 0x477FF000u)
    return uint16_t(sign | 0x7C00);
  if (absx < 0x38800000u) {
    // Below the smallest normal half (2^-14): the result is a subnormal
    // q * 2^-24. Up to 2^-25 (a tie with 0, whose mantissa is even) it is 0.
    if (absx <= 0x33000000u)
      return uint16_t(sign);
    uint32_t exp = absx >> 23;                      // 102 .. 112
    uint32_t mant = (absx & 0x7FFFFFu) | 0x800000u; // implicit bit
    uint32_t shift = 126 - exp;                     // 14 .. 24
    uint32_t q = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (q & 1)))
      ++q; // may carry into the smallest normal (0x400): still correct.
    return uint16_t(sign | q);
  }
  // Normal: rebias the exponent (127 -> 15) and round off 13 mantissa bits.
  // A carry out of the mantissa correctly bumps the exponent.
  uint32_t h = (absx - 0x38000000u) >> 13;
  uint32_t rem = absx & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
    ++h;
  return uint16_t(sign | h);
}

/// bfloat16 -> binary32 (exact: bf16 is the top half of an f32).
inline float bf16ToFloat(uint16_t b) { return bitsToFloat(uint32_t(b) << 16); }

/// binary32 -> bfloat16, round to nearest, ties to even.
inline uint16_t floatToBf16(float f) {
  uint32_t x = floatBits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) // NaN: truncate, keep it quiet.
    return uint16_t((x >> 16) | 0x40);
  // Adding 0x7FFF (+1 when the kept part is odd) carries into bit 16 exactly
  // when the dropped half is above the halfway point, or at it with an odd
  // kept part; overflow rounds to infinity by the same carry.
  x += 0x7FFFu + ((x >> 16) & 1);
  return uint16_t(x >> 16);
}

} // namespace par::rt

#endif // PAR_RUNTIME_COMMON_FLOAT16_H

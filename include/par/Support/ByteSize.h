//===- ByteSize.h - Sizes such as "2GiB" --------------------*- C++ -*-===//
//
// The one spelling of a memory size, shared by par-compile's memory-limit
// option and par-run's --memory-limit: a number (digits, optionally with a
// fraction) with an optional unit K, M, G or T (powers of 1024; "B", "iB"
// may follow; case does not matter); bare digits are bytes. Header-only and
// plain C++, like the tooling that includes it.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_SUPPORT_BYTESIZE_H
#define PAR_SUPPORT_BYTESIZE_H

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace par {

/// The bytes `text` names, or -1 when it is not a size (or names under one
/// byte or over 2^63).
inline int64_t parseByteSize(const std::string &text) {
  size_t b = 0, e = text.size();
  while (b < e && text[b] == ' ')
    ++b;
  while (e > b && text[e - 1] == ' ')
    --e;
  size_t i = b;
  while (i < e && (isdigit((unsigned char)text[i]) || text[i] == '.'))
    ++i;
  if (i == b)
    return -1;
  std::string number = text.substr(b, i - b);
  char *end = nullptr;
  double value = strtod(number.c_str(), &end);
  if (!end || *end)
    return -1;
  std::string unit;
  for (size_t k = i; k < e; ++k)
    if (text[k] != ' ')
      unit += (char)toupper((unsigned char)text[k]);
  double scale = 1;
  if (!unit.empty() && unit != "B") {
    size_t p = std::string("KMGT").find(unit[0]);
    std::string rest = unit.substr(1);
    if (p == std::string::npos || !(rest.empty() || rest == "B" || rest == "IB"))
      return -1;
    for (size_t k = 0; k <= p; ++k)
      scale *= 1024;
  }
  double bytes = value * scale;
  if (bytes < 1 || bytes > 9.0e18)
    return -1;
  return (int64_t)bytes;
}

} // namespace par

#endif // PAR_SUPPORT_BYTESIZE_H

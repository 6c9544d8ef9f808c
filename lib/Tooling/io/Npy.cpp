//===- Npy.cpp - Reading and writing .npy files ---------------------------===//
//
// A header is the magic "\x93NUMPY", a version, the header length (2 bytes
// in version 1, 4 in versions 2 and 3) and a Python dict literal padded
// with spaces to a multiple of 64 bytes; the data follows.
//
//===----------------------------------------------------------------------===//

#include "par/Tooling/Npy.h"

#include "par/Tooling/Diagnostics.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace par::tooling {

namespace {

struct FileCloser {
  void operator()(FILE *f) const { fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;

std::string shapeText(const std::vector<int64_t> &shape, const char *sep) {
  std::string s;
  for (int64_t d : shape)
    s += std::to_string(d) + sep;
  return s;
}

/// The dims of "'shape': (8, 16)" in a header; empty for "()".
std::vector<int64_t> parseShape(const std::string &header) {
  std::vector<int64_t> shape;
  size_t open = header.find("'shape': (");
  size_t close = header.find(')', open);
  if (open == std::string::npos || close == std::string::npos)
    return shape;
  std::string s = header.substr(open + 10, close - open - 10);
  for (size_t p = 0; p < s.size();) {
    while (p < s.size() && (s[p] == ' ' || s[p] == ','))
      ++p;
    if (p >= s.size())
      break;
    shape.push_back(strtoll(s.c_str() + p, nullptr, 10));
    while (p < s.size() && s[p] != ',')
      ++p;
  }
  return shape;
}

/// Reads the header dict of an open .npy file.
std::string readHeader(FILE *f, const std::string &path,
                       const std::string &name) {
  char magic[8];
  if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "\x93NUMPY", 6) != 0 ||
      magic[6] < 1 || magic[6] > 3)
    fatal("input '" + name + "': '" + path + "' is not a .npy file");
  uint32_t len = 0;
  unsigned char lenBytes[4] = {0, 0, 0, 0};
  size_t lenSize = magic[6] == 1 ? 2 : 4;
  if (fread(lenBytes, 1, lenSize, f) != lenSize)
    fatal("input '" + name + "': '" + path + "' is not a .npy file");
  for (size_t i = 0; i < lenSize; ++i)
    len |= (uint32_t)lenBytes[i] << (8 * i);
  std::string header(len, '\0');
  if (fread(header.data(), 1, len, f) != len)
    fatal("input '" + name + "': truncated header in '" + path + "'");
  return header;
}

} // namespace

void writeNpy(const std::string &path, par_dtype_t dtype,
              const std::vector<int64_t> &shape, const void *data) {
  const par_dtype_info_t *d = par_dtype_info(dtype);
  std::string dims = shapeText(shape, ", ");
  // numpy's tuples: "(8,)" for one dim, "(8, 16)" for more, "()" for none.
  if (shape.size() > 1)
    dims.resize(dims.size() - 2);
  else if (shape.size() == 1)
    dims.resize(dims.size() - 1);
  std::string header = std::string("{'descr': '") + d->npy_descr +
                       "', 'fortran_order': False, 'shape': (" + dims +
                       "), }";
  size_t total = 10 + header.size() + 1;
  header += std::string((64 - total % 64) % 64, ' ') + "\n";
  File f(fopen(path.c_str(), "wb"));
  if (!f)
    fatal("cannot write '" + path + "': " + strerror(errno));
  int64_t count = 1;
  for (int64_t s : shape)
    count *= s;
  const char magic[] = "\x93NUMPY\x01\x00";
  unsigned char len[2] = {(unsigned char)(header.size() & 0xFF),
                          (unsigned char)(header.size() >> 8)};
  bool ok = fwrite(magic, 1, 8, f.get()) == 8 &&
            fwrite(len, 1, 2, f.get()) == 2 &&
            fwrite(header.data(), 1, header.size(), f.get()) == header.size() &&
            (int64_t)fwrite(data, d->element_size, count, f.get()) == count;
  if (!ok || fflush(f.get()) != 0)
    fatal("cannot write '" + path + "': " + strerror(errno));
}

Buffer readNpy(const std::string &path, const Tensor &t,
               const std::string &name) {
  File f(fopen(path.c_str(), "rb"));
  if (!f)
    fatal("cannot open input '" + name + "' file '" + path +
          "': " + strerror(errno));
  std::string header = readHeader(f.get(), path, name);
  std::string expect = par_dtype_info(t.dtype)->npy_descr;
  if (header.find("'" + expect + "'") == std::string::npos)
    fatal("input '" + name + "': '" + path + "' does not hold " +
          t.dtypeName + " (" + expect + ") data: " + header);
  if (header.find("'fortran_order': True") != std::string::npos)
    fatal("input '" + name + "': Fortran-ordered arrays are not supported");
  std::vector<int64_t> shape = parseShape(header);
  if (shape != t.global)
    fatal("input '" + name + "': '" + path + "' has shape " +
          shapeText(shape, "x") + " but the program expects " +
          shapeText(t.global, "x"));
  Buffer data = zeroBuffer(t.globalBytes());
  if ((int64_t)fread(data.data(), 1, t.globalBytes(), f.get()) !=
      t.globalBytes())
    fatal("input '" + name + "': '" + path + "' is shorter than its shape");
  return data;
}

} // namespace par::tooling

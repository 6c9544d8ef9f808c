//===- Safetensors.cpp - Reading and writing .safetensors files -----------===//
//
// The header is parsed with the session's JSON reader; offsets are checked
// in 64-bit unsigned arithmetic, so a corrupt header cannot make a read run
// past the file. Written headers are padded with spaces to a multiple of 8
// bytes (as the Python writer does) and list the tensors in name order, their
// data packed in the same order.
//
//===----------------------------------------------------------------------===//

#include "par/Tooling/Safetensors.h"

// The session library's JSON reader (internal to it; shared here rather than
// duplicated).
#include "par/Manifest/Json.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <unistd.h>

namespace par::tooling {

namespace {

struct FileCloser {
  void operator()(FILE *f) const { fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;

struct DtypeName {
  par_dtype_t dtype;
  const char *name;
};
constexpr DtypeName kDtypes[] = {{PAR_F64, "F64"},  {PAR_F32, "F32"},
                                 {PAR_F16, "F16"},  {PAR_BF16, "BF16"},
                                 {PAR_I64, "I64"},  {PAR_I32, "I32"},
                                 {PAR_I8, "I8"},    {PAR_I1, "BOOL"}};

/// The byte count of `shape` elements of `size` bytes; false on overflow.
bool byteCount(const std::vector<int64_t> &shape, int64_t size,
               uint64_t &out) {
  uint64_t n = size;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && n > UINT64_MAX / (uint64_t)d))
      return false;
    n *= d;
  }
  out = n;
  return true;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

} // namespace

const char *safetensorsDtypeName(par_dtype_t dtype) {
  for (const DtypeName &d : kDtypes)
    if (d.dtype == dtype)
      return d.name;
  return "?";
}

bool SafetensorsReader::open(const std::string &path, std::string &error) {
  path_ = path;
  entries_.clear();
  metadata_.clear();
  std::string what = "'" + path + "'";
  File f(fopen(path.c_str(), "rb"));
  if (!f) {
    error = "cannot open " + what + ": " + strerror(errno);
    return false;
  }
  if (fseek(f.get(), 0, SEEK_END) != 0) {
    error = "cannot read " + what + ": " + strerror(errno);
    return false;
  }
  uint64_t fileSize = (uint64_t)ftell(f.get());
  rewind(f.get());
  unsigned char sizeBytes[8];
  if (fileSize < 8 || fread(sizeBytes, 1, 8, f.get()) != 8) {
    error = what + " is not a safetensors file (shorter than its 8-byte "
                   "header size)";
    return false;
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = n << 8 | sizeBytes[i];
  if (n > fileSize - 8) {
    error = what + " is truncated or not a safetensors file (its header "
                   "claims " + std::to_string(n) + " bytes, the file has " +
            std::to_string(fileSize - 8) + " after the size)";
    return false;
  }
  std::string header(n, '\0');
  if (fread(header.data(), 1, n, f.get()) != n) {
    error = "cannot read the header of " + what;
    return false;
  }
  std::string jsonError;
  std::optional<par::JsonValue> root =
      par::JsonValue::parse(header, jsonError);
  if (!root || !root->object()) {
    error = what + " is not a safetensors file (its header is not a JSON "
                   "object" +
            (jsonError.empty() ? std::string() : ": " + jsonError) + ")";
    return false;
  }
  dataStart = 8 + n;
  uint64_t dataSize = fileSize - dataStart;
  for (const auto &[name, v] : *root->object()) {
    if (name == "__metadata__") {
      if (const auto *m = v.object())
        for (const auto &[k, x] : *m)
          if (const std::string *s = x.string())
            metadata_[k] = *s;
      continue;
    }
    std::string tensor = what + ": tensor '" + name + "'";
    SafetensorsEntry e;
    e.name = name;
    const std::string *dtype = v.getString("dtype");
    const std::vector<par::JsonValue> *shape = v.getArray("shape");
    const std::vector<par::JsonValue> *offsets =
        v.getArray("data_offsets");
    if (!dtype || !shape || !offsets || offsets->size() != 2 ||
        !(*offsets)[0].integer() || !(*offsets)[1].integer()) {
      error = tensor + " is malformed (expected {dtype, shape, "
                       "data_offsets: [begin, end]})";
      return false;
    }
    e.dtypeName = *dtype;
    for (const DtypeName &d : kDtypes)
      if (*dtype == d.name) {
        e.supported = true;
        e.dtype = d.dtype;
      }
    for (const par::JsonValue &d : *shape) {
      std::optional<int64_t> i = d.integer();
      if (!i || *i < 0) {
        error = tensor + " has a bad shape (expected non-negative integers)";
        return false;
      }
      e.shape.push_back(*i);
    }
    int64_t b = *(*offsets)[0].integer(), en = *(*offsets)[1].integer();
    if (b < 0 || en < b || (uint64_t)en > dataSize) {
      error = tensor + " lies outside the file (data_offsets [" +
              std::to_string(b) + ", " + std::to_string(en) + "], " +
              std::to_string(dataSize) +
              " data bytes): the file is truncated or corrupt";
      return false;
    }
    e.begin = b;
    e.end = en;
    uint64_t bytes = 0;
    if (e.supported &&
        (!byteCount(e.shape, par_dtype_info(e.dtype)->element_size, bytes) ||
         bytes != e.end - e.begin)) {
      error = tensor + " has " + std::to_string(e.end - e.begin) +
              " bytes of data, but " + e.dtypeName + " " +
              shapeText(e.shape) + " needs " + std::to_string(bytes);
      return false;
    }
    entries_.push_back(std::move(e));
  }
  // Tensors must not share bytes.
  std::vector<const SafetensorsEntry *> byOffset;
  for (const SafetensorsEntry &e : entries_)
    byOffset.push_back(&e);
  std::sort(byOffset.begin(), byOffset.end(),
            [](const SafetensorsEntry *a, const SafetensorsEntry *b) {
              return a->begin < b->begin;
            });
  for (size_t i = 1; i < byOffset.size(); ++i)
    if (byOffset[i]->begin < byOffset[i - 1]->end) {
      error = what + ": tensors '" + byOffset[i - 1]->name + "' and '" +
              byOffset[i]->name + "' overlap: the file is corrupt";
      return false;
    }
  return true;
}

const SafetensorsEntry *SafetensorsReader::find(const std::string &name) const {
  for (const SafetensorsEntry &e : entries_)
    if (e.name == name)
      return &e;
  return nullptr;
}

bool SafetensorsReader::read(const SafetensorsEntry &e, Buffer &out,
                             std::string &error) const {
  std::string what = "'" + path_ + "': tensor '" + e.name + "'";
  if (!e.supported) {
    error = what + " has dtype " + e.dtypeName +
            ", which par does not read (F64, F32, F16, BF16, I64, I32, I8, "
            "BOOL)";
    return false;
  }
  File f(fopen(path_.c_str(), "rb"));
  uint64_t bytes = e.end - e.begin;
  out = zeroBuffer(bytes);
  if (!f || fseek(f.get(), (long)(dataStart + e.begin), SEEK_SET) != 0 ||
      fread(out.data(), 1, bytes, f.get()) != bytes) {
    error = "cannot read " + what + ": the file is truncated or unreadable";
    return false;
  }
  return true;
}

bool writeSafetensors(const std::string &path,
                      const std::vector<SafetensorsTensor> &tensors,
                      const std::map<std::string, std::string> &metadata,
                      std::string &error) {
  std::vector<const SafetensorsTensor *> sorted;
  for (const SafetensorsTensor &t : tensors)
    sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(),
            [](const SafetensorsTensor *a, const SafetensorsTensor *b) {
              return a->name < b->name;
            });
  std::string header = "{";
  if (!metadata.empty()) {
    header += jsonQuote("__metadata__") + ":{";
    bool first = true;
    for (const auto &[k, v] : metadata) {
      header += (first ? "" : ",") + jsonQuote(k) + ":" + jsonQuote(v);
      first = false;
    }
    header += "}";
  }
  std::vector<uint64_t> sizes;
  uint64_t offset = 0;
  for (size_t i = 0; i < sorted.size(); ++i) {
    const SafetensorsTensor &t = *sorted[i];
    if (i > 0 && t.name == sorted[i - 1]->name) {
      error = "cannot write '" + path + "': the tensor name '" + t.name +
              "' appears twice";
      return false;
    }
    uint64_t bytes = 0;
    byteCount(t.shape, par_dtype_info(t.dtype)->element_size, bytes);
    sizes.push_back(bytes);
    std::string shape;
    for (size_t d = 0; d < t.shape.size(); ++d)
      shape += (d ? "," : "") + std::to_string(t.shape[d]);
    header += (i > 0 || !metadata.empty() ? "," : "") + jsonQuote(t.name) +
              ":{\"dtype\":\"" + safetensorsDtypeName(t.dtype) +
              "\",\"shape\":[" + shape + "],\"data_offsets\":[" +
              std::to_string(offset) + "," + std::to_string(offset + bytes) +
              "]}";
    offset += bytes;
  }
  header += "}";
  header += std::string((8 - header.size() % 8) % 8, ' ');
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  bool ok = true;
  {
    File f(fopen(tmp.c_str(), "wb"));
    if (!f) {
      error = "cannot write '" + tmp + "': " + strerror(errno);
      return false;
    }
    unsigned char size[8];
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i)
      size[i] = (unsigned char)(n >> (8 * i));
    ok = fwrite(size, 1, 8, f.get()) == 8 &&
         fwrite(header.data(), 1, n, f.get()) == n;
    for (size_t i = 0; ok && i < sorted.size(); ++i)
      ok = sizes[i] == 0 ||
           fwrite(sorted[i]->data, 1, sizes[i], f.get()) == sizes[i];
    ok = ok && fflush(f.get()) == 0 && fsync(fileno(f.get())) == 0;
  }
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    error = "cannot write '" + path + "': " + strerror(errno);
    unlink(tmp.c_str());
    return false;
  }
  return true;
}

} // namespace par::tooling

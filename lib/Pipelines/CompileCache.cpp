//===- CompileCache.cpp - par-compile's persistent artifact cache ---------===//
//
// See CompileCache.h.
//
//===----------------------------------------------------------------------===//

#include "par/Pipelines/CompileCache.h"
#include "par/Support/ByteSize.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/BLAKE3.h"
#include "llvm/Support/Chrono.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdlib>
#include <random>

using namespace mlir;
using namespace mlir::par;
namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;

namespace {

std::string hex(StringRef bytes) {
  llvm::BLAKE3 hasher;
  hasher.update(bytes);
  auto result = hasher.final();
  return llvm::toHex(ArrayRef<uint8_t>(result.data(), result.size()),
                     /*LowerCase=*/true);
}

/// A name no other process picks: the pid and a random number.
std::string uniqueSuffix() {
  static std::mt19937_64 random(std::random_device{}() ^
                                (uint64_t)llvm::sys::Process::getProcessId());
  return std::to_string(llvm::sys::Process::getProcessId()) + "-" +
         llvm::utohexstr(random());
}

std::string joinPath(StringRef a, StringRef b) {
  llvm::SmallString<256> p(a);
  path::append(p, b);
  return p.str().str();
}

/// Writes `bytes` to `to` through a temporary in the same directory and a
/// rename, so `to` is never seen half written.
bool writeAtomically(StringRef to, StringRef bytes, unsigned mode,
                     std::string &why) {
  std::string tmp = to.str() + ".tmp-" + uniqueSuffix();
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(tmp, ec, fs::OF_None);
    if (ec) {
      why = "cannot write '" + tmp + "': " + ec.message();
      return false;
    }
    os << bytes;
    os.close();
    if (os.has_error()) {
      why = "cannot write '" + tmp + "': " + os.error().message();
      os.clear_error();
      fs::remove(tmp);
      return false;
    }
  }
  fs::setPermissions(tmp, static_cast<fs::perms>(mode));
  if (std::error_code ec = fs::rename(tmp, to)) {
    why = "cannot rename '" + tmp + "' to '" + to.str() + "': " + ec.message();
    fs::remove(tmp);
    return false;
  }
  return true;
}

struct IndexLine {
  uint64_t size;
  std::string hash;
  std::string name;
};

/// Parses an INDEX; false if it is malformed.
bool parseIndex(StringRef text, SmallVectorImpl<IndexLine> &lines) {
  SmallVector<StringRef> rows;
  text.split(rows, '\n', -1, /*KeepEmpty=*/false);
  if (rows.empty())
    return false;
  for (StringRef row : rows) {
    auto [size, rest] = row.split(' ');
    auto [hash, name] = rest.split(' ');
    IndexLine line;
    if (size.getAsInteger(10, line.size) || hash.size() != 64 ||
        name.empty() || name.contains('/') || name.starts_with("."))
      return false;
    line.hash = hash.str();
    line.name = name.str();
    lines.push_back(line);
  }
  return true;
}

} // namespace

std::string CompileCache::defaultDir() {
  if (const char *env = getenv("PAR_COMPILE_CACHE"); env && *env)
    return env;
  llvm::SmallString<256> base;
  if (const char *xdg = getenv("XDG_CACHE_HOME"); xdg && *xdg)
    base = xdg;
  else if (!path::home_directory(base))
    return "";
  else
    path::append(base, ".cache");
  path::append(base, "par", "compile");
  return base.str().str();
}

std::string CompileCache::key(ArrayRef<std::string> parts) {
  std::string all;
  for (const std::string &part : parts)
    all += std::to_string(part.size()) + ":" + part + ";";
  return hex(all);
}

std::string CompileCache::hashFile(StringRef file) {
  auto buffer = llvm::MemoryBuffer::getFile(file, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return "";
  return hex((*buffer)->getBuffer());
}

bool CompileCache::fetch(StringRef key, StringRef outDir,
                         std::string &warning) {
  std::string entry = joinPath(dir, key);
  std::string indexPath = joinPath(entry, "INDEX");
  auto index = llvm::MemoryBuffer::getFile(indexPath, /*IsText=*/true);
  if (!index)
    return false; // not cached (or removed meanwhile)
  auto corrupt = [&](const std::string &why) {
    warning = "compile cache entry '" + entry + "' is corrupt (" + why +
              "); rebuilding it";
    remove(entry);
    return false;
  };
  SmallVector<IndexLine> lines;
  if (!parseIndex((*index)->getBuffer(), lines))
    return corrupt("malformed INDEX");
  // Every file read and checked before any is copied out.
  std::vector<std::unique_ptr<llvm::MemoryBuffer>> files;
  for (const IndexLine &line : lines) {
    auto file = llvm::MemoryBuffer::getFile(joinPath(entry, line.name),
                                            /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
    if (!file)
      return corrupt(line.name + ": " + file.getError().message());
    StringRef bytes = (*file)->getBuffer();
    if (bytes.size() != line.size)
      return corrupt(line.name + ": " + std::to_string(bytes.size()) +
                     " bytes, the index says " + std::to_string(line.size));
    if (hex(bytes) != line.hash)
      return corrupt(line.name + ": its hash differs from the index's");
    files.push_back(std::move(*file));
  }
  if (std::error_code ec = fs::create_directories(outDir)) {
    warning = "cannot create '" + outDir.str() + "': " + ec.message();
    return false;
  }
  for (auto [line, file] : llvm::zip(lines, files)) {
    std::string why;
    unsigned mode = StringRef(line.name).ends_with(".so") ? 0755 : 0644;
    if (!writeAtomically(joinPath(outDir, line.name), file->getBuffer(), mode,
                         why)) {
      warning = why;
      return false;
    }
  }
  // Recently used: the LRU order reads the INDEX's modification time.
  int fd;
  if (!fs::openFileForWrite(indexPath, fd, fs::CD_OpenExisting,
                            fs::OF_Append)) {
    fs::setLastAccessAndModificationTime(fd, std::chrono::system_clock::now());
    llvm::sys::Process::SafelyCloseFileDescriptor(fd);
  }
  return true;
}

void CompileCache::store(StringRef key, StringRef outDir,
                         ArrayRef<std::string> names, std::string &warning) {
  if (std::error_code ec = fs::create_directories(dir)) {
    warning = "cannot create the compile cache '" + dir + "': " + ec.message();
    return;
  }
  std::string tmp = joinPath(dir, "tmp-" + uniqueSuffix());
  if (std::error_code ec = fs::create_directory(tmp)) {
    warning = "cannot write to the compile cache '" + dir + "': " +
              ec.message();
    return;
  }
  std::string index;
  for (const std::string &name : names) {
    auto file = llvm::MemoryBuffer::getFile(joinPath(outDir, name),
                                            /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
    std::string why;
    if (!file) {
      warning = "cannot read '" + joinPath(outDir, name) +
                "' to cache it: " + file.getError().message();
    } else if (!writeAtomically(joinPath(tmp, name), (*file)->getBuffer(), 0644,
                                why)) {
      warning = why;
    } else {
      StringRef bytes = (*file)->getBuffer();
      index += std::to_string(bytes.size()) + " " + hex(bytes) + " " + name +
               "\n";
      continue;
    }
    fs::remove_directories(tmp);
    return;
  }
  std::string why;
  if (!writeAtomically(joinPath(tmp, "INDEX"), index, 0644, why)) {
    warning = why;
    fs::remove_directories(tmp);
    return;
  }
  // Whole or not at all; if another process stored the same key first,
  // its entry stays (same key, same bytes) and this one goes.
  if (fs::rename(tmp, joinPath(dir, key)))
    fs::remove_directories(tmp);
  evict();
}

void CompileCache::remove(StringRef entry) {
  std::string trash = joinPath(dir, "trash-" + uniqueSuffix());
  if (!fs::rename(entry, trash))
    fs::remove_directories(trash);
}

void CompileCache::evict() {
  struct Entry {
    std::string path;
    llvm::sys::TimePoint<> used;
    uint64_t bytes;
  };
  std::vector<Entry> entries;
  auto now = std::chrono::system_clock::now();
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec)) {
    std::string entry = it->path();
    StringRef name = path::filename(entry);
    fs::file_status status;
    if (name.starts_with("tmp-") || name.starts_with("trash-")) {
      // Left by a process that died mid-write: gone after a day.
      if (!fs::status(entry, status) &&
          now - status.getLastModificationTime() > std::chrono::hours(24))
        fs::remove_directories(entry);
      continue;
    }
    std::string indexPath = joinPath(entry, "INDEX");
    auto index = llvm::MemoryBuffer::getFile(indexPath, /*IsText=*/true);
    SmallVector<IndexLine> lines;
    if (!index || fs::status(indexPath, status) ||
        !parseIndex((*index)->getBuffer(), lines))
      continue; // being removed, or corrupt: its next reader removes it
    uint64_t bytes = 0;
    for (const IndexLine &line : lines)
      bytes += line.size;
    entries.push_back({entry, status.getLastModificationTime(), bytes});
  }
  llvm::sort(entries, [](const Entry &a, const Entry &b) {
    return a.used > b.used;
  });
  // The newest entry (the one just stored) stays, whatever its size.
  uint64_t total = 0;
  for (const auto &[i, entry] : llvm::enumerate(entries)) {
    total += entry.bytes;
    if (i > 0 && total > limitBytes)
      remove(entry.path);
  }
}

LogicalResult CompileCache::clean(std::string &error) {
  if (!fs::exists(dir))
    return success();
  std::error_code ec;
  std::vector<std::string> entries;
  for (fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec))
    entries.push_back(it->path());
  if (ec) {
    error = "cannot read the compile cache '" + dir + "': " + ec.message();
    return failure();
  }
  for (const std::string &entry : entries) {
    if (path::filename(entry).starts_with("trash-"))
      fs::remove_directories(entry);
    else
      remove(entry);
  }
  return success();
}

bool mlir::par::parseByteSize(StringRef text, uint64_t &bytes) {
  int64_t b = ::par::parseByteSize(text.str());
  if (b < 0)
    return false;
  bytes = uint64_t(b);
  return true;
}

//===- Checkpoint.cpp - Sharded checkpoints of the training state ---------===//
//
// Saving: each rank writes one file with the blocks it is the writer of
// and reports their records (key, offset, size, global start and shape,
// CRC-32) as text; rank 0 gathers the records, checks that the shards of
// each tensor cover it exactly once, writes the manifest and renames the
// directory into place. The ranks agree on success after each phase (a
// failure anywhere, a full disk say, stops every rank with the failing
// rank's message and leaves the previous checkpoints as they were).
//
// Loading: every rank reads the manifest and, per tensor it holds, the
// shards overlapping its block, checking each shard's size and CRC-32
// before copying the intersection into place.
//
//===----------------------------------------------------------------------===//

#include "par/Tooling/Checkpoint.h"

#include "par/Tooling/Diagnostics.h"
#include "par/Tooling/Launcher.h"

#include "par/Manifest/Json.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace par::tooling {

using par::JsonValue;

uint32_t crc32(const void *data, size_t n, uint32_t crc) {
  static uint32_t table[256];
  static bool ready = false;
  if (!ready) {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
    ready = true;
  }
  const unsigned char *p = static_cast<const unsigned char *>(data);
  crc = ~crc;
  for (size_t i = 0; i < n; ++i)
    crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

uint32_t fileCrc32(const std::string &path) {
  FILE *f = fopen(path.c_str(), "rb");
  if (!f)
    fatal("cannot open '" + path + "': " + strerror(errno));
  uint32_t crc = 0;
  char buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
    crc = crc32(buf, n, crc);
  fclose(f);
  return crc;
}

std::vector<int64_t> blockStart(const Function &f, const Tensor &t,
                                const std::vector<int64_t> &coords) {
  std::vector<int64_t> off(t.global.size(), 0);
  for (size_t d = 0; d < t.global.size(); ++d) {
    int64_t block = 0;
    for (int64_t a : t.dims[d])
      block = block * f.axisSizes[a] + coords[a];
    off[d] = block * t.local[d];
  }
  return off;
}

namespace {

std::string stepName(int64_t step) {
  char buf[32];
  snprintf(buf, sizeof(buf), "step-%08lld", (long long)step);
  return buf;
}

std::string rankFile(int64_t rank) {
  char buf[32];
  snprintf(buf, sizeof(buf), "rank-%05lld.bin", (long long)rank);
  return buf;
}

std::string intList(const std::vector<int64_t> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string shapeText(const std::vector<int64_t> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

bool fsyncPath(const std::string &path) {
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return false;
  bool ok = fsync(fd) == 0;
  close(fd);
  return ok;
}

bool makeDirs(const std::string &dir, std::string &error) {
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    partial = dir.substr(0, pos);
    if (partial.empty())
      continue;
    if (mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      error = "cannot create '" + partial + "': " + strerror(errno);
      return false;
    }
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    error = "'" + dir + "' is not a directory";
    return false;
  }
  return true;
}

/// The job agrees: every rank's `error` ("" when fine) goes to rank 0,
/// which broadcasts the first failure; returns it ("" when all are fine),
/// prefixed with the failing rank.
std::string agree(par_rt_context_t *ctx, const std::string &error) {
  constexpr int64_t kBytes = 768;
  int64_t rank = par_rt_context_rank(ctx),
          world = par_rt_context_world_size(ctx);
  std::vector<char> mine(kBytes, 0), all(kBytes * world, 0);
  memcpy(mine.data(), error.data(), std::min<size_t>(error.size(), kBytes - 1));
  checkRuntime(par_rt_gather_world(ctx, mine.data(), kBytes, all.data()), ctx,
               "gathering the checkpoint status");
  std::vector<char> first(kBytes, 0);
  if (rank == 0)
    for (int64_t r = 0; r < world; ++r)
      if (all[r * kBytes]) {
        std::string m = (world > 1 ? "rank " + std::to_string(r) + ": " : "") +
                        std::string(&all[r * kBytes]);
        memcpy(first.data(), m.data(), std::min<size_t>(m.size(), kBytes - 1));
        break;
      }
  checkRuntime(par_rt_broadcast_world(ctx, first.data(), kBytes, 0), ctx,
               "broadcasting the checkpoint status");
  return std::string(first.data());
}

/// After agreement on a failure: rank 0 reports it, every rank exits 1
/// (the others without repeating the message).
[[noreturn]] void failAll(par_rt_context_t *ctx, const std::string &msg) {
  if (par_rt_context_rank(ctx) == 0)
    fatal(msg);
  fflush(stdout);
  // Rank 0's message first: the launcher stops the job when it exits.
  sleep(2);
  exit(1);
}

constexpr char kSep = '\x1f', kSub = '\x1e';
/// The offset field of a replica's record (not written; CRC only).
constexpr uint64_t kReplica = ~0ull;

std::string joinInts(const std::vector<int64_t> &v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

/// One shard's record, a line of fields separated by kSep: key, offset,
/// bytes, crc, start, shape, then the tensor's description (name, aliases,
/// dtype, global shape, the axes of each dimension, layout-bound), so that
/// rank 0 can describe tensors it does not hold itself.
std::string shardRecord(const CheckpointTensor &t, uint64_t offset,
                        uint32_t crc, const std::vector<int64_t> &start) {
  const Tensor &x = t.tensor();
  std::string aliases, dims;
  for (size_t i = 0; i < x.aliases.size(); ++i)
    aliases += (i ? std::string(1, kSub) : "") + x.aliases[i];
  for (size_t d = 0; d < x.dims.size(); ++d) {
    dims += d ? ";" : "";
    for (size_t k = 0; k < x.dims[d].size(); ++k)
      dims += (k ? "," : "") + t.fn->axisNames[x.dims[d][k]];
  }
  std::string f[] = {t.key,          std::to_string(offset),
                     std::to_string(x.localBytes()), std::to_string(crc),
                     joinInts(start), joinInts(x.local),
                     x.name,         aliases,
                     x.dtypeName,    joinInts(x.global),
                     dims,           t.layoutBound ? "1" : "0"};
  std::string line;
  for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); ++i)
    line += (i ? std::string(1, kSep) : "") + f[i];
  return line + "\n";
}

struct TensorInfo {
  std::string name;
  std::vector<std::string> aliases;
  std::string dtype;
  std::vector<int64_t> global;
  std::vector<std::vector<std::string>> dims; // axis names per dimension
  bool layoutBound = false;
};

struct Shard {
  int64_t rank;
  uint64_t offset, bytes;
  uint32_t crc;
  std::vector<int64_t> start, shape;
};

std::vector<std::string> split(const std::string &s, char sep) {
  std::vector<std::string> out;
  size_t p = 0;
  while (true) {
    size_t q = s.find(sep, p);
    out.push_back(s.substr(p, q - p));
    if (q == std::string::npos)
      return out;
    p = q + 1;
  }
}

std::vector<int64_t> parseInts(const std::string &s) {
  std::vector<int64_t> v;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos)
      comma = s.size();
    v.push_back(strtoll(s.substr(pos, comma - pos).c_str(), nullptr, 10));
    pos = comma + 1;
  }
  return v;
}

/// Rank 0: the manifest text from the tensors' descriptions and every
/// rank's shard records; "" and `error` set when the shards do not cover
/// each tensor exactly once.
std::string manifestText(const CheckpointMeta &meta,
                         const std::vector<std::string> &records,
                         size_t &tensorCount,
                         std::vector<std::string> &divergent,
                         std::string &error) {
  std::map<std::string, std::vector<Shard>> shards, replicas;
  std::map<std::string, TensorInfo> infos;
  for (size_t r = 0; r < records.size(); ++r) {
    for (const std::string &line : split(records[r], '\n')) {
      if (line.empty())
        continue;
      std::vector<std::string> f = split(line, kSep);
      if (f.size() != 12) {
        error = "malformed shard record from rank " + std::to_string(r);
        return "";
      }
      if (strtoull(f[1].c_str(), nullptr, 10) == kReplica) {
        replicas[f[0]].push_back({(int64_t)r, kReplica, 0,
                                  (uint32_t)strtoul(f[3].c_str(), nullptr, 10),
                                  parseInts(f[4]), {}});
        continue;
      }
      shards[f[0]].push_back({(int64_t)r, strtoull(f[1].c_str(), nullptr, 10),
                              strtoull(f[2].c_str(), nullptr, 10),
                              (uint32_t)strtoul(f[3].c_str(), nullptr, 10),
                              parseInts(f[4]), parseInts(f[5])});
      TensorInfo info;
      info.name = f[6];
      if (!f[7].empty())
        info.aliases = split(f[7], kSub);
      info.dtype = f[8];
      info.global = parseInts(f[9]);
      for (const std::string &d : split(f[10], ';'))
        info.dims.push_back(d.empty() ? std::vector<std::string>{}
                                      : split(d, ','));
      if (info.global.empty())
        info.dims.clear();
      info.layoutBound = f[11] == "1";
      infos.emplace(f[0], std::move(info));
    }
  }
  // Replicas must hold the writer's values (the sharding says so).
  for (auto &[key, list] : replicas)
    for (const Shard &rep : list)
      for (const Shard &w : shards[key])
        if (w.start == rep.start && w.crc != rep.crc) {
          const TensorInfo &info = infos[key];
          divergent.push_back(key + (info.name.empty() ? "" : " (" + info.name + ")") +
                              ": rank " + std::to_string(rep.rank) +
                              "'s copy of the block at " + intList(rep.start) +
                              " differs from rank " + std::to_string(w.rank) +
                              "'s");
        }
  std::string s = "{\n  \"format\": \"par-checkpoint\",\n  \"version\": 1,\n";
  s += "  \"step\": " + std::to_string(meta.step) + ",\n";
  s += "  \"seed\": " + std::to_string(meta.seed) + ",\n";
  s += "  \"data\": " + jsonQuote(meta.data) + ",\n";
  s += "  \"data_crc32\": " + std::to_string(meta.dataCrc) + ",\n";
  s += "  \"function\": " + jsonQuote(meta.function) + ",\n";
  s += "  \"layout\": " + jsonQuote(meta.layout) + ",\n";
  s += "  \"mesh\": [";
  for (size_t a = 0; a < meta.axisNames.size(); ++a)
    s += std::string(a ? ", " : "") + "{\"name\": " + jsonQuote(meta.axisNames[a]) +
         ", \"size\": " + std::to_string(meta.axisSizes[a]) + "}";
  s += "],\n  \"tensors\": [";
  bool firstTensor = true;
  for (auto &[key, info] : infos) {
    const std::vector<Shard> &list = shards[key];
    int64_t count = 1, covered = 0;
    for (int64_t d : info.global)
      count *= d;
    for (const Shard &sh : list) {
      int64_t n = 1;
      for (int64_t d : sh.shape)
        n *= d;
      covered += n;
    }
    if (covered != count) {
      error = "the shards of '" + key + "' hold " + std::to_string(covered) +
              " of its " + std::to_string(count) + " elements";
      return "";
    }
    s += std::string(firstTensor ? "\n" : ",\n") + "    {\"key\": " +
         jsonQuote(key) + ", \"name\": " + jsonQuote(info.name) + ", \"aliases\": [";
    firstTensor = false;
    for (size_t i = 0; i < info.aliases.size(); ++i)
      s += (i ? ", " : "") + jsonQuote(info.aliases[i]);
    s += "], \"dtype\": " + jsonQuote(info.dtype) +
         ", \"global_shape\": " + intList(info.global) + ", \"dims\": [";
    for (size_t d = 0; d < info.dims.size(); ++d) {
      s += d ? ", [" : "[";
      for (size_t k = 0; k < info.dims[d].size(); ++k)
        s += (k ? ", " : "") + jsonQuote(info.dims[d][k]);
      s += "]";
    }
    s += std::string("], \"layout_bound\": ") +
         (info.layoutBound ? "true" : "false") + ",\n     \"shards\": [";
    for (size_t k = 0; k < list.size(); ++k)
      s += std::string(k ? ",\n                " : "") +
           "{\"file\": " + jsonQuote(rankFile(list[k].rank)) +
           ", \"offset\": " + std::to_string(list[k].offset) +
           ", \"bytes\": " + std::to_string(list[k].bytes) +
           ", \"crc32\": " + std::to_string(list[k].crc) +
           ", \"start\": " + intList(list[k].start) +
           ", \"shape\": " + intList(list[k].shape) + "}";
    s += "]}";
  }
  s += "\n  ]\n}\n";
  tensorCount = infos.size();
  return s;
}

bool writeFile(const std::string &path, const std::string &text,
               std::string &error) {
  FILE *f = fopen(path.c_str(), "wb");
  bool ok = f && fwrite(text.data(), 1, text.size(), f) == text.size() &&
            fflush(f) == 0 && fsync(fileno(f)) == 0;
  int err = errno;
  if (f && fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok)
    error = "cannot write '" + path + "': " + strerror(err);
  return ok;
}

/// Fault injection for the atomicity test: PAR_RUN_INJECT_CHECKPOINT_KILL=R:S
/// kills rank R with SIGKILL after it wrote its shards of step S's
/// checkpoint, before the manifest exists.
void injectCheckpointKill(int64_t rank, int64_t step) {
  const char *v = getenv("PAR_RUN_INJECT_CHECKPOINT_KILL");
  if (!v)
    return;
  long long r = -1, s = -1;
  if (sscanf(v, "%lld:%lld", &r, &s) == 2 && r == rank && s == step) {
    fprintf(stderr, "%s: rank %lld: killing itself during the checkpoint of "
                    "step %lld (PAR_RUN_INJECT_CHECKPOINT_KILL)\n",
            toolName().c_str(), r, s);
    fflush(stderr);
    raise(SIGKILL);
  }
}

std::vector<std::string> completeCheckpoints(const std::string &dir) {
  std::vector<std::string> out;
  DIR *d = opendir(dir.c_str());
  if (!d)
    return out;
  while (dirent *e = readdir(d)) {
    std::string n = e->d_name;
    if (n.rfind("step-", 0) != 0)
      continue;
    struct stat st;
    if (stat((dir + "/" + n + "/manifest.json").c_str(), &st) == 0)
      out.push_back(n);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace

void saveCheckpoint(par_rt_context_t *ctx, const CheckpointOptions &o,
                    const CheckpointMeta &meta,
                    const std::vector<CheckpointTensor> &tensors) {
  int64_t rank = par_rt_context_rank(ctx),
          world = par_rt_context_world_size(ctx);
  std::string name = stepName(meta.step);
  std::string tmp = o.dir + "/.tmp-" + name, final = o.dir + "/" + name;
  std::string where = "--checkpoint: ";
  // A write past a size limit fails with EFBIG instead of killing the rank.
  signal(SIGXFSZ, SIG_IGN);
  std::string error;
  if (rank == 0) {
    if (makeDirs(o.dir, error)) {
      // Unfinished writes of crashed runs.
      if (DIR *d = opendir(o.dir.c_str())) {
        std::vector<std::string> stale;
        while (dirent *e = readdir(d))
          if (std::string(e->d_name).rfind(".tmp-step-", 0) == 0)
            stale.push_back(o.dir + "/" + e->d_name);
        closedir(d);
        for (const std::string &p : stale)
          removeTree(p);
      }
      if (mkdir(tmp.c_str(), 0755) != 0)
        error = "cannot create '" + tmp + "': " + strerror(errno);
    }
  }
  if (std::string e = agree(ctx, error); !e.empty())
    failAll(ctx, where + e);

  // Every rank: its shards into one file.
  std::string records, file = tmp + "/" + rankFile(rank);
  std::vector<const CheckpointTensor *> mine;
  for (const CheckpointTensor &t : tensors)
    if (t.writer)
      mine.push_back(&t);
    else if (t.host && (int64_t)t.host->size() >= t.tensor().localBytes())
      // A replica: its CRC, for rank 0's check that replicas agree.
      records += shardRecord(t, kReplica,
                             crc32(t.host->data(), t.tensor().localBytes()),
                             blockStart(*t.fn, t.tensor(), t.fn->coords(rank)));
  if (!mine.empty()) {
    FILE *f = fopen(file.c_str(), "wb");
    bool ok = f != nullptr;
    int err = errno;
    uint64_t offset = 0;
    for (size_t i = 0; ok && i < mine.size(); ++i) {
      const CheckpointTensor &t = *mine[i];
      int64_t bytes = t.tensor().localBytes();
      if ((int64_t)t.host->size() < bytes) {
        ok = false;
        err = EINVAL;
        break;
      }
      ok = bytes == 0 || fwrite(t.host->data(), 1, bytes, f) == (size_t)bytes;
      err = errno;
      std::vector<int64_t> c = t.fn->coords(rank);
      records += shardRecord(t, offset, crc32(t.host->data(), bytes),
                             blockStart(*t.fn, t.tensor(), c));
      offset += bytes;
    }
    if (ok && (fflush(f) != 0 || fsync(fileno(f)) != 0)) {
      ok = false;
      err = errno;
    }
    if (f && fclose(f) != 0 && ok) {
      ok = false;
      err = errno;
    }
    if (!ok)
      error = "cannot write '" + file + "': " + strerror(err);
  }
  injectCheckpointKill(rank, meta.step);
  // The records to rank 0 (lengths first, then padded texts).
  int64_t len = records.size() + 1, maxLen = 0;
  std::vector<int64_t> lens(world);
  checkRuntime(par_rt_gather_world(ctx, &len, sizeof(len), lens.data()), ctx,
               "gathering the checkpoint records");
  if (rank == 0)
    maxLen = *std::max_element(lens.begin(), lens.end());
  checkRuntime(par_rt_broadcast_world(ctx, &maxLen, sizeof(maxLen), 0), ctx,
               "broadcasting the checkpoint record size");
  std::vector<char> padded(maxLen, 0), all(maxLen * world, 0);
  memcpy(padded.data(), records.data(), records.size());
  checkRuntime(par_rt_gather_world(ctx, padded.data(), maxLen, all.data()),
               ctx, "gathering the checkpoint records");
  if (std::string e = agree(ctx, error); !e.empty()) {
    if (rank == 0)
      removeTree(tmp);
    failAll(ctx, where + e + " (the previous checkpoints are unchanged)");
  }

  // Rank 0: the manifest, then the rename into place and the pruning.
  std::vector<std::string> pruned, divergent;
  size_t tensorCount = 0;
  if (rank == 0) {
    std::vector<std::string> texts;
    for (int64_t r = 0; r < world; ++r)
      texts.push_back(std::string(&all[r * maxLen]));
    std::string text =
        manifestText(meta, texts, tensorCount, divergent, error);
    std::string m = tmp + "/manifest.json", mt = m + ".tmp";
    if (error.empty() && writeFile(mt, text, error) &&
        rename(mt.c_str(), m.c_str()) != 0)
      error = "cannot rename '" + mt + "': " + strerror(errno);
    if (error.empty() && !fsyncPath(tmp))
      error = "cannot sync '" + tmp + "': " + strerror(errno);
    if (error.empty()) {
      removeTree(final); // an older save of the same step
      if (rename(tmp.c_str(), final.c_str()) != 0)
        error = "cannot rename '" + tmp + "' to '" + final +
                "': " + strerror(errno);
      else if (!fsyncPath(o.dir))
        error = "cannot sync '" + o.dir + "': " + strerror(errno);
    }
    if (!error.empty())
      removeTree(tmp);
    else if (o.keep > 0) {
      std::vector<std::string> all = completeCheckpoints(o.dir);
      for (size_t i = 0; i + o.keep < all.size(); ++i) {
        removeTree(o.dir + "/" + all[i]);
        pruned.push_back(all[i]);
      }
    }
  }
  if (std::string e = agree(ctx, error); !e.empty())
    failAll(ctx, where + e + " (the previous checkpoints are unchanged)");
  if (rank == 0) {
    printf("%s: saved checkpoint %s (step %lld, %zu tensors)",
           toolName().c_str(), final.c_str(), (long long)meta.step,
           tensorCount);
    if (!pruned.empty())
      printf("; removed %s%s", pruned.front().c_str(),
             pruned.size() > 1 ? " and older" : "");
    printf("\n");
    // A replicated tensor whose copies differ: the program broke its own
    // sharding (the checkpoint keeps the writer's copy).
    for (size_t i = 0; i < divergent.size() && i < 3; ++i)
      fprintf(stderr, "%s: warning: replicas differ: %s\n", toolName().c_str(),
              divergent[i].c_str());
    if (divergent.size() > 3)
      fprintf(stderr, "%s: warning: replicas differ in %zu blocks in all; the "
                      "checkpoint keeps the first replica's\n",
              toolName().c_str(), divergent.size());
    fflush(stdout);
  }
}

std::string newestCheckpoint(const std::string &dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0)
    fatal("--resume: cannot open '" + dir + "': " + strerror(errno));
  if (!S_ISDIR(st.st_mode))
    fatal("--resume: '" + dir + "' is not a directory");
  if (stat((dir + "/manifest.json").c_str(), &st) == 0)
    return dir;
  std::vector<std::string> all = completeCheckpoints(dir);
  return all.empty() ? "" : dir + "/" + all.back();
}

struct CheckpointReader::Impl {
  struct Entry {
    TensorInfo info;
    std::vector<Shard> shards;
    std::vector<std::string> files; // per shard
  };
  std::map<std::string, Entry> tensors;
  std::string error; // the first failure on this rank
};

namespace {

std::optional<std::vector<int64_t>> intsOf(const JsonValue *v) {
  if (!v || !v->array())
    return std::nullopt;
  std::vector<int64_t> out;
  for (const JsonValue &x : *v->array()) {
    std::optional<int64_t> i = x.integer();
    if (!i)
      return std::nullopt;
    out.push_back(*i);
  }
  return out;
}

std::string readText(const std::string &path, std::string &error) {
  FILE *f = fopen(path.c_str(), "rb");
  if (!f) {
    error = "cannot open '" + path + "': " + strerror(errno);
    return "";
  }
  std::string text;
  char buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
    text.append(buf, n);
  fclose(f);
  return text;
}

/// Copies the intersection of the box (`srcStart`, `srcShape`) holding
/// `src` with the box (`dstStart`, `dstShape`) holding `dst`; returns the
/// elements copied.
int64_t copyOverlap(const std::vector<int64_t> &srcStart,
                    const std::vector<int64_t> &srcShape, const char *src,
                    const std::vector<int64_t> &dstStart,
                    const std::vector<int64_t> &dstShape, char *dst,
                    int64_t es) {
  size_t rank = dstShape.size();
  std::vector<int64_t> lo(rank), hi(rank);
  for (size_t d = 0; d < rank; ++d) {
    lo[d] = std::max(srcStart[d], dstStart[d]);
    hi[d] = std::min(srcStart[d] + srcShape[d], dstStart[d] + dstShape[d]);
    if (lo[d] >= hi[d])
      return 0;
  }
  if (rank == 0) {
    memcpy(dst, src, es);
    return 1;
  }
  int64_t copied = 0, run = hi[rank - 1] - lo[rank - 1];
  std::vector<int64_t> idx = lo;
  while (true) {
    int64_t so = 0, dOff = 0;
    for (size_t d = 0; d < rank; ++d) {
      so = so * srcShape[d] + (idx[d] - srcStart[d]);
      dOff = dOff * dstShape[d] + (idx[d] - dstStart[d]);
    }
    memcpy(dst + dOff * es, src + so * es, run * es);
    copied += run;
    int64_t d = (int64_t)rank - 2;
    for (; d >= 0; --d) {
      if (++idx[d] < hi[d])
        break;
      idx[d] = lo[d];
    }
    if (d < 0)
      return copied;
  }
}

} // namespace

CheckpointReader::CheckpointReader(const std::string &dir)
    : impl(std::make_unique<Impl>()) {
  path_ = newestCheckpoint(dir);
  if (path_.empty())
    fatal("--resume: '" + dir + "' holds no complete checkpoint (no step-* "
          "directory with a manifest.json)");
  std::string mpath = path_ + "/manifest.json", error;
  std::string text = readText(mpath, error);
  if (!error.empty())
    fatal("--resume: " + error);
  std::optional<JsonValue> root = JsonValue::parse(text, error);
  auto bad = [&](const std::string &why) {
    fatal("--resume: '" + mpath + "' is not a par checkpoint manifest: " +
          why);
  };
  if (!root)
    bad(error);
  const std::string *format = root->getString("format");
  if (!format || *format != "par-checkpoint")
    bad("no \"format\": \"par-checkpoint\"");
  if (root->getInteger("version") != std::optional<int64_t>(1))
    bad("version is not 1");
  std::optional<int64_t> step = root->getInteger("step"),
                         seed = root->getInteger("seed"),
                         dataCrc = root->getInteger("data_crc32");
  const std::string *data = root->getString("data"),
                    *function = root->getString("function"),
                    *layout = root->getString("layout");
  const std::vector<JsonValue> *mesh = root->getArray("mesh"),
                               *tensors = root->getArray("tensors");
  if (!step || !seed || !dataCrc || !data || !function || !layout || !mesh ||
      !tensors)
    bad("a field of step, seed, data, data_crc32, function, layout, mesh, "
        "tensors is missing or of the wrong kind");
  meta_.step = *step;
  meta_.seed = (uint64_t)*seed;
  meta_.data = *data;
  meta_.dataCrc = (uint32_t)*dataCrc;
  meta_.function = *function;
  meta_.layout = *layout;
  for (const JsonValue &a : *mesh) {
    const std::string *n = a.getString("name");
    std::optional<int64_t> size = a.getInteger("size");
    if (!n || !size)
      bad("a mesh axis lacks its name or size");
    meta_.axisNames.push_back(*n);
    meta_.axisSizes.push_back(*size);
  }
  for (const JsonValue &t : *tensors) {
    const std::string *key = t.getString("key"), *name = t.getString("name"),
                      *dtype = t.getString("dtype");
    std::optional<std::vector<int64_t>> global = intsOf(t.get("global_shape"));
    const std::vector<JsonValue> *shards = t.getArray("shards");
    if (!key || !name || !dtype || !global || !shards)
      bad("a tensor lacks its key, name, dtype, global_shape or shards");
    Impl::Entry e;
    e.info.name = *name;
    e.info.dtype = *dtype;
    e.info.global = *global;
    const JsonValue *lb = t.get("layout_bound");
    e.info.layoutBound = lb && lb->boolean().value_or(false);
    if (const std::vector<JsonValue> *al = t.getArray("aliases"))
      for (const JsonValue &a : *al)
        if (a.string())
          e.info.aliases.push_back(*a.string());
    for (const JsonValue &sh : *shards) {
      const std::string *file = sh.getString("file");
      std::optional<int64_t> off = sh.getInteger("offset"),
                             bytes = sh.getInteger("bytes"),
                             crc = sh.getInteger("crc32");
      std::optional<std::vector<int64_t>> start = intsOf(sh.get("start")),
                                          shape = intsOf(sh.get("shape"));
      if (!file || !off || !bytes || !crc || !start || !shape ||
          start->size() != global->size() || shape->size() != global->size() ||
          file->find('/') != std::string::npos)
        bad("a shard of '" + *key + "' is malformed");
      e.shards.push_back({0, (uint64_t)*off, (uint64_t)*bytes, (uint32_t)*crc,
                          *start, *shape});
      e.files.push_back(path_ + "/" + *file);
    }
    impl->tensors[*key] = std::move(e);
  }
}

CheckpointReader::~CheckpointReader() = default;

bool CheckpointReader::sameLayout(const CheckpointMeta &here) const {
  return meta_.layout == here.layout && meta_.function == here.function &&
         meta_.axisNames == here.axisNames && meta_.axisSizes == here.axisSizes;
}

bool CheckpointReader::load(const CheckpointTensor &t, int64_t rank) {
  if (!impl->error.empty())
    return false;
  const Tensor &x = t.tensor();
  std::string label = t.key + (x.name.empty() ? "" : " (" + x.name + ")");
  auto it = impl->tensors.find(t.key);
  if (it == impl->tensors.end()) {
    if (!t.layoutBound)
      impl->error = "'" + path_ + "' has no tensor " + label +
                    ": it is from another model or optimizer";
    return false;
  }
  const Impl::Entry &e = it->second;
  if (e.info.dtype != x.dtypeName || e.info.global != x.global) {
    impl->error = "'" + path_ + "/manifest.json': " + label + " is " +
                  e.info.dtype + " " + shapeText(e.info.global) +
                  " there but " + x.dtypeName + " " + shapeText(x.global) +
                  " in '" + t.fn->name + "': the checkpoint is from another "
                  "model";
    return false;
  }
  if (t.layoutBound && !sameLayout(meta_)) // checked by the caller too
    return false;
  std::vector<int64_t> start = blockStart(*t.fn, x, t.fn->coords(rank));
  int64_t es = x.elementSize, copied = 0;
  t.host->assign(std::max<int64_t>(1, x.localBytes()), 0);
  for (size_t k = 0; k < e.shards.size(); ++k) {
    const Shard &sh = e.shards[k];
    bool overlaps = true;
    int64_t count = 1;
    for (size_t d = 0; d < start.size(); ++d) {
      overlaps = overlaps && sh.start[d] < start[d] + x.local[d] &&
                 start[d] < sh.start[d] + sh.shape[d];
      count *= sh.shape[d];
    }
    if (!overlaps)
      continue;
    const std::string &file = e.files[k];
    if ((uint64_t)(count * es) != sh.bytes) {
      impl->error = "'" + path_ + "/manifest.json': the shard of " + label +
                    " in '" + file + "' has " + std::to_string(sh.bytes) +
                    " bytes for " + std::to_string(count) + " elements";
      return false;
    }
    FILE *f = fopen(file.c_str(), "rb");
    if (!f) {
      impl->error = "cannot open the shard file '" + file + "' of " + label +
                    ": " + strerror(errno);
      return false;
    }
    struct stat st;
    Buffer bytes(std::max<uint64_t>(1, sh.bytes));
    bool sized = fstat(fileno(f), &st) == 0 &&
                 (uint64_t)st.st_size >= sh.offset + sh.bytes;
    bool read = sized && fseek(f, (long)sh.offset, SEEK_SET) == 0 &&
                fread(bytes.data(), 1, sh.bytes, f) == sh.bytes;
    fclose(f);
    if (!sized) {
      impl->error = "the shard file '" + file + "' is truncated: " +
                    std::to_string(st.st_size) + " bytes, but the shard of " +
                    label + " ends at byte " +
                    std::to_string(sh.offset + sh.bytes);
      return false;
    }
    if (!read) {
      impl->error = "cannot read the shard of " + label + " from '" + file +
                    "': " + strerror(errno);
      return false;
    }
    if (crc32(bytes.data(), sh.bytes) != sh.crc) {
      impl->error = "the shard file '" + file + "' is corrupt: the shard of " +
                    label + " (bytes " + std::to_string(sh.offset) + ".." +
                    std::to_string(sh.offset + sh.bytes) +
                    ") fails its CRC-32 check";
      return false;
    }
    copied += copyOverlap(sh.start, sh.shape, bytes.data(), start, x.local,
                          t.host->data(), es);
  }
  if (copied != x.localCount) {
    impl->error = "'" + path_ + "/manifest.json': the shards of " + label +
                  " cover " + std::to_string(copied) + " of the " +
                  std::to_string(x.localCount) + " elements of rank " +
                  std::to_string(rank) + "'s block";
    return false;
  }
  return true;
}

void CheckpointReader::finish(par_rt_context_t *ctx,
                              const std::set<std::string> &programKeys) const {
  std::string error = impl->error;
  if (error.empty())
    for (auto &[key, e] : impl->tensors)
      if (!e.info.layoutBound && !programKeys.count(key)) {
        error = "'" + path_ + "' holds " + key +
                (e.info.name.empty() ? "" : " (" + e.info.name + ")") + ", " +
                e.info.dtype + " " + shapeText(e.info.global) +
                ", which this program does not have: it is from another "
                "model or optimizer";
        break;
      }
  if (error.empty())
    for (const std::string &key : programKeys)
      if (!impl->tensors.count(key)) {
        error = "'" + path_ + "' has no tensor " + key +
                ": it is from another model or optimizer";
        break;
      }
  if (std::string e = agree(ctx, error); !e.empty())
    failAll(ctx, "--resume: " + e);
}

void CheckpointReader::reportResumed(int64_t reset) const {
  printf("%s: resumed from %s (step %lld; saved by '%s' on mesh",
         toolName().c_str(), path_.c_str(), (long long)meta_.step,
         meta_.function.c_str());
  for (size_t a = 0; a < meta_.axisNames.size(); ++a)
    printf(" %s=%lld", meta_.axisNames[a].c_str(),
           (long long)meta_.axisSizes[a]);
  printf(", %s)\n", meta_.layout.c_str());
  if (reset > 0)
    printf("%s: the checkpoint is from another layout: %lld gradient "
           "compression state tensor(s) (error feedback) start from zero\n",
           toolName().c_str(), (long long)reset);
}

} // namespace par::tooling

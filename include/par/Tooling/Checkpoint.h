//===- Checkpoint.h - Sharded checkpoints of the training state -*- C++ -*-===//
//
// par-run's --checkpoint DIR / --resume DIR (docs/Checkpoints.md). A
// checkpoint is a directory DIR/step-NNNNNNNN holding
//   rank-RRRRR.bin  each rank's blocks of the state tensors it writes (the
//                   one copy of each distinct block: replicas write nothing)
//   manifest.json   per tensor its key, global shape, dtype, the mesh axes
//                   splitting each dimension, and its shards (file, byte
//                   offset, size, global start and shape, CRC-32); plus the
//                   step, the seed, the corpus and the mesh it was saved on
// Writes are atomic: the ranks write into DIR/.tmp-step-NNNNNNNN and fsync;
// rank 0 writes the manifest (temporary, fsync, rename), then renames the
// directory to its final name and fsyncs DIR. Only complete checkpoints
// are ever visible under a step-* name; the last K are kept.
//
// A tensor's key is layout-independent: "argK" of the unpipelined train
// step (its parameters, optimizer state, step counter and loss-scale
// state). Loading assembles each rank's block of each tensor from the
// shards that overlap it, by global index, so a checkpoint saved on one
// mesh (or pipelined) loads on another. Error-feedback buffers of gradient
// compression are bound to their layout ("layout-bound" tensors): they load
// only onto the same mesh and program, and start from zero otherwise.
//
// Every function here is collective over the job; every failure is fatal
// on every rank with a message naming the file (rank 0 prints it).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TOOLING_CHECKPOINT_H
#define PAR_TOOLING_CHECKPOINT_H

#include "par/Tooling/Function.h"

#include "par/Runtime/par_runtime.h"

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace par::tooling {

/// One state tensor as this rank holds it.
struct CheckpointTensor {
  std::string key;            // "arg5", or a layout-bound key
  const Function *fn = nullptr; // the function whose input `input` it is
  size_t input = 0;
  bool layoutBound = false;
  /// This rank writes its block (the one copy of it); the caller clears it
  /// for a second holder of the same key (a tied parameter's later stage).
  bool writer = true;
  /// Mesh axis that places the tensor (the pipeline axis: a stage's tensor
  /// exists on one coordinate of it), or -1.
  int64_t ownerAxis = -1;
  Buffer *host = nullptr; // this rank's local block (save: read; load: set)

  const Tensor &tensor() const { return fn->inputs[input]; }
};

/// What a checkpoint records besides the tensors.
struct CheckpointMeta {
  int64_t step = 0;
  uint64_t seed = 0;
  std::string data;     // the corpus path ("" without --data)
  uint32_t dataCrc = 0; // its contents' CRC-32
  std::string function; // the train step
  std::string layout;   // "plain" or "pipelined"
  std::vector<std::string> axisNames;
  std::vector<int64_t> axisSizes;
};

struct CheckpointOptions {
  std::string dir;    // --checkpoint DIR
  int64_t every = 0;  // --save-every N (0: only at the end)
  int64_t keep = 0;   // --keep K (0: all)
};

/// CRC-32 (IEEE 802.3, zlib's) of `n` bytes, continuing `crc`.
uint32_t crc32(const void *data, size_t n, uint32_t crc = 0);
/// CRC-32 of a file's contents (fatal if it cannot be read).
uint32_t fileCrc32(const std::string &path);

/// Writes the checkpoint of `meta.step` under `o.dir`, every rank its
/// blocks of `tensors` (host copies), and removes the oldest complete ones
/// beyond `o.keep`. Rank 0 prints what was saved. Collective.
void saveCheckpoint(par_rt_context_t *ctx, const CheckpointOptions &o,
                    const CheckpointMeta &meta,
                    const std::vector<CheckpointTensor> &tensors);

/// The newest complete checkpoint in `dir` (its step-* directory), or ""
/// when there is none; fatal if `dir` cannot be read.
std::string newestCheckpoint(const std::string &dir);

/// A complete checkpoint opened for loading.
class CheckpointReader {
public:
  /// Opens `dir` (a step-* directory, or a directory of them: the newest);
  /// fatal if there is none or its manifest is unreadable or malformed.
  explicit CheckpointReader(const std::string &dir);
  ~CheckpointReader();
  const CheckpointMeta &meta() const { return meta_; }
  const std::string &path() const { return path_; }
  /// Whether the checkpoint was saved on this program's layout (same mesh
  /// and layout kind): layout-bound tensors load only then.
  bool sameLayout(const CheckpointMeta &here) const;
  /// Fills `t.host` with this rank's block of `t` from the shards that
  /// overlap it (size- and CRC-checked). Returns false, leaving the value,
  /// for a layout-bound tensor on another layout or one the checkpoint
  /// lacks. A missing or mismatching tensor or a bad shard is recorded (the
  /// first failure on this rank) and reported by finish().
  bool load(const CheckpointTensor &t, int64_t rank);
  /// Collective: fatal on every rank (rank 0 printing the first failure of
  /// any rank) if a load failed, or if the checkpoint and the program do
  /// not hold the same tensors: `programKeys` are the keys of every state
  /// tensor of the program (all stages'), layout-bound ones aside.
  void finish(par_rt_context_t *ctx,
              const std::set<std::string> &programKeys) const;

  /// Prints "par-run: resumed from DIR (step k; saved by F on mesh ...)"
  /// and, when `reset` layout-bound tensors started from zero, says so.
  void reportResumed(int64_t reset) const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
  std::string path_;
  CheckpointMeta meta_;
};

/// This rank's block offset of `t` (of `f`) at mesh coordinates `coords`
/// (each dimension split over its axes, major first: the session's rule).
std::vector<int64_t> blockStart(const Function &f, const Tensor &t,
                                const std::vector<int64_t> &coords);

} // namespace par::tooling

#endif // PAR_TOOLING_CHECKPOINT_H

//===- StateLayout.cpp - The train state's gathers, weights, checkpoints --===//

#include "par/Tooling/StateLayout.h"

#include "par/Tooling/TrainState.h"
#include "par/Tooling/Weights.h"

#include <deque>
#include <set>

namespace par::tooling {

namespace {

/// This rank's block of `s` on the host (zeros where it holds none).
Buffer localBlock(const StateSlot &s) {
  if (s.host)
    return *s.host;
  if (s.device)
    return s.device->download();
  return zeroBuffer(s.tensor().localBytes());
}

/// `s`'s global value on rank 0 (collective over every rank).
Buffer gatherSlot(const StateLayout &l, const StateSlot &s) {
  Buffer local = localBlock(s);
  if (s.holderAxis < 0)
    return s.fn->gather(PAR_INPUT, s.input, local.data());
  std::vector<int64_t> source(l.axes, 0);
  source[s.holderAxis] = s.holder;
  return s.fn->gather(PAR_INPUT, s.input, local.data(), source.data());
}

/// `s` as the checkpoint sees it, its block at `host`; `rank` writes it
/// when it holds the copy that is read and is its blocks' first replica.
CheckpointTensor checkpointTensor(const StateSlot &s, int64_t rank,
                                  Buffer *host) {
  CheckpointTensor t;
  t.key = s.key;
  t.fn = s.fn;
  t.input = s.input;
  t.layoutBound = s.layoutBound;
  t.writer = s.primary && writesBlock(*s.fn, s.tensor(), rank, s.holderAxis);
  t.ownerAxis = s.holderAxis;
  t.host = host;
  return t;
}

bool selected(const StateSlot &s, StateSelection sel) {
  if (!s.primary || s.global < 0)
    return false;
  return sel == StateSelection::Mapped || s.parameter;
}

} // namespace

std::map<int64_t, Buffer> gatherState(const StateLayout &l,
                                      StateSelection sel) {
  std::map<int64_t, Buffer> whole;
  for (const StateSlot &s : l.slots)
    if (selected(s, sel)) {
      Buffer g = gatherSlot(l, s);
      if (l.rank == 0)
        whole[s.global] = std::move(g);
    }
  return whole;
}

void saveNamedWeights(const StateLayout &l, const std::string &path,
                      const std::string &fn) {
  std::deque<Buffer> whole; // global, on rank 0
  std::vector<const StateSlot *> named;
  for (const StateSlot &s : l.slots)
    if (s.parameter && s.primary && !s.tensor().name.empty()) {
      whole.push_back(gatherSlot(l, s));
      named.push_back(&s);
    }
  if (l.rank != 0)
    return;
  std::vector<NamedValue> values;
  for (size_t k = 0; k < named.size(); ++k)
    values.push_back({&named[k]->tensor(), &whole[k]});
  saveWeights(path, fn, values);
}

void saveStateCheckpoint(par_rt_context_t *ctx, const CheckpointOptions &o,
                         const CheckpointMeta &meta, const StateLayout &l) {
  std::deque<Buffer> copies; // session buffers' blocks
  std::vector<CheckpointTensor> tensors;
  for (const StateSlot &s : l.slots) {
    if (s.key.empty() || !s.held())
      continue;
    Buffer *host = s.host;
    if (!host) {
      copies.push_back(s.device->download());
      host = &copies.back();
    }
    tensors.push_back(checkpointTensor(s, l.rank, host));
  }
  saveCheckpoint(ctx, o, meta, tensors);
}

void resumeState(par_rt_context_t *ctx, const std::string &dir,
                 const CheckpointMeta &here, const StateLayout &l) {
  CheckpointReader reader(dir);
  bool same = reader.sameLayout(here);
  std::set<std::string> keys; // every rank's, layout-bound ones aside
  int64_t reset = 0;
  for (const StateSlot &s : l.slots) {
    if (s.key.empty())
      continue;
    if (!s.layoutBound)
      keys.insert(s.key);
    if (!s.held())
      continue;
    if (s.layoutBound && !same) {
      ++reset;
      continue;
    }
    Buffer block;
    if (!s.host)
      block = zeroBuffer(s.tensor().localBytes());
    CheckpointTensor t =
        checkpointTensor(s, l.rank, s.host ? s.host : &block);
    if (reader.load(t, l.rank) && s.device)
      s.device->upload(block);
  }
  reader.finish(ctx, keys);
  if (l.rank == 0)
    reader.reportResumed(reset);
}

} // namespace par::tooling

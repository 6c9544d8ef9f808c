//===- CharData.h - Character-level corpus and batches ----------*- C++ -*-===//
//
// The character tokenizer (printable ASCII 32..126 -> 0..94, newline -> 95,
// anything else -> 0, a space; 96 symbols) and a data loader over a corpus
// file: row r of step s's batch is the window of the corpus starting at a
// position drawn from (seed, s, r) alone, so every layout of a program sees
// the same batch; the targets are the tokens shifted by one.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TOOLING_CHARDATA_H
#define PAR_TOOLING_CHARDATA_H

#include "par/Tooling/Function.h"

#include <string>
#include <vector>

namespace par::tooling {

int64_t charToken(unsigned char c);
/// The tokenizer's inverse ('?' for a token outside it).
char tokenChar(int64_t token);

struct DataLoader {
  std::vector<int64_t> tokens;
  uint64_t seed = 0;

  /// Reads and tokenizes the corpus; fatal if it cannot be read.
  void load(const std::string &path);
  /// Checks that arguments `tokensArg` and `targetsArg` of `f` are i64
  /// [batch, seq] tensors the corpus has a window for.
  void check(const Function &f, size_t tokensArg, size_t targetsArg) const;
  /// Fatal unless the corpus holds a window of `seq` tokens and its target.
  void checkWindow(int64_t seq) const;
  /// The global token (or, with `isTarget`, target) tensor `t` of
  /// micro-batch `mb` of `m` of step `step`: its row i is row i * m + mb of
  /// the step's batch, as par-optimizer's micro-batches=m slices it (m = 1,
  /// mb = 0: the whole batch).
  Buffer batch(const Tensor &t, bool isTarget, int64_t step, int64_t m = 1,
               int64_t mb = 0) const;
};

} // namespace par::tooling

#endif // PAR_TOOLING_CHARDATA_H

//===- CharData.cpp - Character-level corpus and batches ------------------===//
//
// Window starts come from the value generator (Values.h) on a seed of its
// own, so that data and parameters do not share random numbers.
//
//===----------------------------------------------------------------------===//

#include "par/Tooling/CharData.h"

#include "par/Tooling/Diagnostics.h"
#include "par/Tooling/Values.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace par::tooling {

int64_t charToken(unsigned char c) {
  if (c >= 32 && c <= 126)
    return c - 32;
  return c == '\n' ? 95 : 0;
}

char tokenChar(int64_t t) {
  if (t >= 0 && t <= 94)
    return (char)(t + 32);
  return t == 95 ? '\n' : '?';
}

void DataLoader::load(const std::string &path) {
  FILE *f = fopen(path.c_str(), "rb");
  if (!f)
    fatal("cannot open data file '" + path + "': " + strerror(errno));
  int c;
  while ((c = fgetc(f)) != EOF)
    tokens.push_back(charToken((unsigned char)c));
  fclose(f);
}

void DataLoader::check(const Function &f, size_t tokensArg,
                       size_t targetsArg) const {
  for (size_t a : {tokensArg, targetsArg}) {
    if (a >= f.inputs.size())
      fatal("--data: '" + f.name + "' has no arg" + std::to_string(a));
    const Tensor &t = f.inputs[a];
    if (t.dtype != PAR_I64 || t.global.size() != 2)
      fatal("--data: " + inputLabel(f.inputs, a) + " of '" + f.name +
            "' must be an i64 [batch, seq] tensor");
    if (t.vocab > 0 && t.vocab < 96)
      fatal("--data: " + inputLabel(f.inputs, a) + " of '" + f.name +
            "' takes token ids in [0, " + std::to_string(t.vocab) +
            "), but the character tokenizer has 96 symbols");
    checkWindow(t.global[1]);
  }
}

void DataLoader::checkWindow(int64_t seq) const {
  if ((int64_t)tokens.size() < seq + 2)
    fatal("--data: the corpus is shorter than one window");
}

Buffer DataLoader::batch(const Tensor &t, bool isTarget, int64_t step,
                         int64_t m, int64_t mb) const {
  Buffer buf = zeroBuffer(t.globalBytes());
  int64_t seq = t.global[1];
  checkWindow(seq);
  uint64_t windows = tokens.size() - seq - 1;
  for (int64_t g = 0; g < t.globalCount; ++g) {
    int64_t row = (g / seq) * m + mb, col = g % seq;
    double r = generate(seed ^ 0xDA7Aull, step, row);
    uint64_t start = (uint64_t)((r + 1.0) / 2.0 * windows);
    ((int64_t *)buf.data())[g] = tokens[start + col + (isTarget ? 1 : 0)];
  }
  return buf;
}

} // namespace par::tooling

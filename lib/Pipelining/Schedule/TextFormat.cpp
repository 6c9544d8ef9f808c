//===- TextFormat.cpp - The program text format ---------------------------===//
//
// Printing and parsing the program text format ("pipeline p=2 m=2 ...",
// "rank 0: F(mb=0,s=0) send-act(mb=0,s=1,to=1) ..."), with messages that
// name the file, the line and the token.
//
//===----------------------------------------------------------------------===//

#include "par/Pipelining/Schedule.h"
#include "ScheduleDetail.h"

#include <cctype>
#include <cstdlib>

namespace par {
namespace pipeline {

using namespace detail;

std::string printPrograms(const PipelineShape &shape,
                          const Programs &programs) {
  std::string out = "pipeline p=" + std::to_string(shape.p) +
                    " m=" + std::to_string(shape.m) +
                    " v=" + std::to_string(shape.v) + " backward=" +
                    (shape.splitBackward ? "split" : "full") +
                    (shape.vShape ? " placement=v" : "") + "\n";
  for (size_t r = 0; r < programs.size(); ++r) {
    out += "rank " + std::to_string(r) + ":";
    for (const Action &a : programs[r])
      out += " " + formatAction(a);
    out += "\n";
  }
  return out;
}

namespace {

/// A whole non-negative decimal number, or -1.
long parseCount(const std::string &text) {
  if (text.empty() || text.size() > 9)
    return -1;
  for (char c : text)
    if (c < '0' || c > '9')
      return -1;
  return std::strtol(text.c_str(), nullptr, 10);
}

std::vector<std::string> splitWords(const std::string &line) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i])))
      ++i;
    size_t start = i;
    while (i < line.size() &&
           !std::isspace(static_cast<unsigned char>(line[i])))
      ++i;
    if (i > start)
      words.push_back(line.substr(start, i - start));
  }
  return words;
}

/// Parses one action token; returns "" or a message.
std::string parseAction(const std::string &word, const PipelineShape &shape,
                        Action &a) {
  size_t open = word.find('(');
  if (open == std::string::npos || word.back() != ')')
    return "malformed action '" + word +
           "' (expected e.g. F(mb=0,s=0) or send-act(mb=0,s=1,to=1))";
  std::string name = word.substr(0, open);
  bool found = false;
  for (Op op : {Op::F, Op::B, Op::BI, Op::BW, Op::SendAct, Op::RecvAct,
                Op::SendGrad, Op::RecvGrad}) {
    if (name == opName(op)) {
      a.op = op;
      found = true;
    }
  }
  if (!found)
    return "unknown action '" + name + "' in '" + word +
           "' (expected F, B, BI, BW, send-act, recv-act, send-grad or "
           "recv-grad)";
  std::string peerKey = a.isSend() ? "to" : a.isRecv() ? "from" : "";
  long mb = -1, stage = -1, peer = -1;
  std::string args = word.substr(open + 1, word.size() - open - 2);
  size_t i = 0;
  while (i <= args.size()) {
    size_t comma = args.find(',', i);
    if (comma == std::string::npos)
      comma = args.size();
    std::string item = args.substr(i, comma - i);
    size_t eq = item.find('=');
    long value = eq == std::string::npos ? -1 : parseCount(item.substr(eq + 1));
    std::string key = eq == std::string::npos ? item : item.substr(0, eq);
    long *slot = key == "mb"  ? &mb
                 : key == "s" ? &stage
                 : (!peerKey.empty() && key == peerKey) ? &peer
                                                        : nullptr;
    if (!slot || value < 0 || *slot >= 0)
      return "malformed argument '" + item + "' in '" + word + "'";
    *slot = value;
    i = comma + 1;
  }
  if (mb < 0 || stage < 0 || (!peerKey.empty() && peer < 0))
    return "'" + word + "' needs mb=, s=" +
           (peerKey.empty() ? "" : " and " + peerKey + "=");
  if (mb >= shape.m)
    return "'" + word + "': micro-batch " + std::to_string(mb) +
           " out of range (m=" + std::to_string(shape.m) + ")";
  if (stage >= shape.numStages())
    return "'" + word + "': stage " + std::to_string(stage) +
           " out of range (" + std::to_string(shape.numStages()) + " stages)";
  if (!peerKey.empty() && peer >= shape.p)
    return "'" + word + "': rank " + std::to_string(peer) +
           " out of range (p=" + std::to_string(shape.p) + ")";
  a.mb = static_cast<int>(mb);
  a.stage = static_cast<int>(stage);
  a.peer = peerKey.empty() ? -1 : static_cast<int>(peer);
  return "";
}

/// Parses "pipeline p=2 m=4 v=1 backward=full [placement=v]"; returns ""
/// or a message.
std::string parseHeader(const std::vector<std::string> &words,
                        PipelineShape &shape) {
  long p = -1, m = -1, v = 1;
  std::string backward = "full", placement = "loop";
  for (size_t i = 1; i < words.size(); ++i) {
    const std::string &w = words[i];
    size_t eq = w.find('=');
    std::string key = w.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : w.substr(eq + 1);
    if (key == "backward" && (value == "full" || value == "split")) {
      backward = value;
      continue;
    }
    if (key == "placement" && (value == "loop" || value == "v")) {
      placement = value;
      continue;
    }
    long *slot = key == "p" ? &p : key == "m" ? &m : key == "v" ? &v : nullptr;
    long n = parseCount(value);
    if (!slot || n < 0)
      return "malformed header item '" + w +
             "' (expected p=N m=N [v=N] [backward=full|split] "
             "[placement=loop|v])";
    *slot = n;
  }
  if (p < 0 || m < 0)
    return "the pipeline header needs p= and m=";
  shape.p = static_cast<int>(p);
  shape.m = static_cast<int>(m);
  shape.v = static_cast<int>(v);
  shape.splitBackward = backward == "split";
  shape.vShape = placement == "v";
  return validateShape(shape);
}

} // namespace

bool parsePrograms(const std::string &text, const std::string &name,
                   PipelineShape &shape, Programs &programs,
                   std::string &error) {
  bool haveHeader = false;
  size_t lineNo = 0, start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos)
      end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    ++lineNo;
    std::string where = name + ":" + std::to_string(lineNo) + ": ";
    size_t hash = line.find('#');
    if (hash != std::string::npos)
      line.resize(hash);
    std::vector<std::string> words = splitWords(line);
    if (words.empty())
      continue;
    if (words[0] == "pipeline") {
      if (haveHeader) {
        error = where + "a second pipeline header";
        return false;
      }
      std::string message = parseHeader(words, shape);
      if (!message.empty()) {
        error = where + message;
        return false;
      }
      haveHeader = true;
      programs.assign(shape.p, {});
      continue;
    }
    if (!haveHeader) {
      error = where + "expected 'pipeline p=N m=N [v=N] "
                      "[backward=full|split] [placement=loop|v]' before any "
                      "rank line";
      return false;
    }
    // "rank 3:" (or "rank 3 :").
    std::string rankText = words.size() > 1 ? words[1] : "";
    size_t first = 2;
    if (!rankText.empty() && rankText.back() == ':') {
      rankText.pop_back();
    } else if (words.size() > 2 && words[2] == ":") {
      first = 3;
    } else {
      rankText.clear();
    }
    long r = parseCount(rankText);
    if (words[0] != "rank" || r < 0) {
      error = where + "expected 'rank N: actions...', got '" + words[0] +
              (words.size() > 1 ? " " + words[1] : "") + "'";
      return false;
    }
    if (r >= shape.p) {
      error = where + "rank " + std::to_string(r) + " out of range (p=" +
              std::to_string(shape.p) + ")";
      return false;
    }
    for (size_t i = first; i < words.size(); ++i) {
      Action a;
      std::string message = parseAction(words[i], shape, a);
      if (!message.empty()) {
        error = where + message;
        return false;
      }
      programs[r].push_back(a);
    }
  }
  if (!haveHeader) {
    error = name + ": no 'pipeline p=N m=N' header (empty file?)";
    return false;
  }
  return true;
}

} // namespace pipeline
} // namespace par

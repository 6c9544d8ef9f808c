//===- Diagram.cpp - The timetable as a text diagram ----------------------===//
//
// One line per rank, one column per time quantum (renderDiagram), or the
// actions with their times where the durations have no common quantum.
//
//===----------------------------------------------------------------------===//

#include "par/Pipelining/Schedule.h"

#include <algorithm>
#include <cmath>

namespace par {
namespace pipeline {

std::string renderDiagram(const Timetable &tt) {
  const PipelineShape &shape = tt.shape;
  // The time quantum: the shortest duration, or a half, third or quarter of
  // it, so that every start and end falls on a column boundary. Without one
  // (or with more than 1000 columns) the actions are listed with times.
  double shortest = 0;
  for (const auto &rank : tt.ranks)
    for (const TimedAction &t : rank)
      if (shortest == 0 || t.end - t.start < shortest)
        shortest = t.end - t.start;
  if (tt.costs.comm > 0 && tt.costs.comm < shortest)
    shortest = tt.costs.comm;
  auto aligned = [&](double q) {
    for (const auto &rank : tt.ranks)
      for (const TimedAction &t : rank)
        for (double x : {t.start, t.end})
          if (std::fabs(x / q - std::round(x / q)) > 1e-6)
            return false;
    return true;
  };
  double quantum = 0;
  for (int k = 1; k <= 4 && shortest > 0; ++k) {
    if (aligned(shortest / k)) {
      quantum = shortest / k;
      break;
    }
  }
  long columns = quantum > 0 ? std::lround(tt.makespan / quantum) : 0;
  auto label = [&](const Action &a) {
    std::string s = a.op == Op::F ? "F" : a.op == Op::BW ? "W" : "B";
    s += std::to_string(a.mb);
    if (shape.v > 1)
      s += "." + std::to_string(a.stage / shape.p);
    return s;
  };
  std::string rankWidth = std::to_string(shape.p - 1);
  auto rowName = [&](const std::string &name) {
    std::string s = name;
    s.resize(std::max(s.size(), 5 + rankWidth.size()), ' ');
    return s + " |";
  };
  std::string out;
  if (quantum == 0 || columns > 1000) {
    // Durations without a common quantum: list the actions with times.
    for (int r = 0; r < shape.p; ++r) {
      out += rowName("rank " + std::to_string(r));
      for (const TimedAction &t : tt.ranks[r])
        out += " " + label(t.action) + "@" + formatNumber(t.start) + "-" +
               formatNumber(t.end);
      out += "\n";
    }
    return out;
  }
  size_t width = 1;
  for (const auto &rank : tt.ranks)
    for (const TimedAction &t : rank)
      width = std::max(width, label(t.action).size());
  std::vector<std::vector<std::string>> grid(
      shape.p, std::vector<std::string>(columns, "."));
  for (int r = 0; r < shape.p; ++r)
    for (const TimedAction &t : tt.ranks[r])
      for (long c = std::lround(t.start / quantum),
                e = std::lround(t.end / quantum);
           c < e && c < columns; ++c)
        grid[r][c] = label(t.action);
  auto pad = [&](std::string s) {
    s.resize(std::max(s.size(), width), ' ');
    return s;
  };
  // A time tick every 5 columns.
  std::string ticks = rowName("time");
  for (long c = 0; c < columns; c += 5) {
    std::string tick = " " + formatNumber(c * quantum);
    tick.resize(5 * (width + 1), ' ');
    ticks += tick;
  }
  while (!ticks.empty() && ticks.back() == ' ')
    ticks.pop_back();
  out += ticks + "\n";
  for (int r = 0; r < shape.p; ++r) {
    std::string row = rowName("rank " + std::to_string(r));
    for (long c = 0; c < columns; ++c)
      row += " " + pad(grid[r][c]);
    while (!row.empty() && row.back() == ' ')
      row.pop_back();
    out += row + "\n";
  }
  out += "(one column = " + formatNumber(quantum) +
         " time unit; F forward, B backward" +
         (shape.splitBackward ? " (input gradient), W weight gradient"
                              : "") +
         (shape.v > 1 ? ", Fm.c micro-batch m on the rank's chunk c" : "") + ", . idle)\n";
  return out;
}

} // namespace pipeline
} // namespace par

//===- LossPlot.h - An SVG plot of a loss curve -----------------*- C++ -*-===//
//
// A dependency-free line plot of the loss per step (opens in any browser):
// five ticks on each axis, non-finite losses left out.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TOOLING_LOSSPLOT_H
#define PAR_TOOLING_LOSSPLOT_H

#include <string>
#include <vector>

namespace par::tooling {

/// Writes losses[i] (step i + 1) to `path`; fatal if it cannot be written.
void writeLossPlot(const std::string &path, const std::vector<double> &losses,
                   const std::string &title);

} // namespace par::tooling

#endif // PAR_TOOLING_LOSSPLOT_H

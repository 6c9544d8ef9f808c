//===- LossPlot.cpp - An SVG plot of a loss curve -------------------------===//
//
// A 640x400 canvas: the plot area inside fixed margins, the y range the
// losses' (widened when flat), the x range the steps.
//
//===----------------------------------------------------------------------===//

#include "par/Tooling/LossPlot.h"

#include "par/Tooling/Diagnostics.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace par::tooling {

namespace {

const double W = 640, H = 400, L = 60, R = 20, T = 40, B = 50;

/// The plot's coordinates for a step (x) and a loss (y).
struct Frame {
  double lo = INFINITY, hi = -INFINITY;
  size_t n;
  explicit Frame(const std::vector<double> &losses) : n(losses.size()) {
    for (double l : losses)
      if (std::isfinite(l)) {
        lo = std::min(lo, l);
        hi = std::max(hi, l);
      }
    if (!std::isfinite(lo)) {
      lo = 0;
      hi = 1;
    }
    if (hi - lo < 1e-9) {
      lo -= 0.5;
      hi += 0.5;
    }
  }
  double x(double step) const {
    return L + (n > 1 ? (step - 1) / (double)(n - 1) : 0.5) * (W - L - R);
  }
  double y(double v) const { return T + (hi - v) / (hi - lo) * (H - T - B); }
};

void writeAxes(FILE *f, const Frame &fr) {
  fprintf(f, "<path d=\"M%g %g V%g H%g\" stroke=\"black\" fill=\"none\"/>\n",
          L, T, H - B, W - R);
  for (int i = 0; i <= 4; ++i) {
    double v = fr.lo + (fr.hi - fr.lo) * i / 4.0;
    fprintf(f,
            "<text x=\"%g\" y=\"%g\" text-anchor=\"end\">%.3g</text>\n"
            "<path d=\"M%g %g H%g\" stroke=\"#ddd\"/>\n",
            L - 6, fr.y(v) + 4, v, L, fr.y(v), W - R);
    double st = 1 + (fr.n > 1 ? (fr.n - 1) * i / 4.0 : 0);
    fprintf(f, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">%.0f</text>\n",
            fr.x(st), H - B + 18, st);
  }
  fprintf(f,
          "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">step</text>\n"
          "<text x=\"16\" y=\"%g\" transform=\"rotate(-90 16 %g)\" "
          "text-anchor=\"middle\">loss</text>\n",
          (L + W - R) / 2, H - 12, (T + H - B) / 2, (T + H - B) / 2);
}

} // namespace

void writeLossPlot(const std::string &path, const std::vector<double> &losses,
                   const std::string &title) {
  FILE *f = fopen(path.c_str(), "w");
  if (!f)
    fatal("cannot write '" + path + "': " + strerror(errno));
  Frame fr(losses);
  fprintf(f,
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" "
          "height=\"%g\" font-family=\"sans-serif\" font-size=\"12\">\n"
          "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
          "<text x=\"%g\" y=\"24\" text-anchor=\"middle\" "
          "font-size=\"15\">%s</text>\n",
          W, H, W / 2, title.c_str());
  writeAxes(f, fr);
  fprintf(f, "<polyline fill=\"none\" stroke=\"#1f77b4\" "
             "stroke-width=\"1.5\" points=\"");
  for (size_t i = 0; i < losses.size(); ++i)
    if (std::isfinite(losses[i]))
      fprintf(f, "%.1f,%.1f ", fr.x(i + 1), fr.y(losses[i]));
  fprintf(f, "\"/>\n</svg>\n");
  fclose(f);
}

} // namespace par::tooling

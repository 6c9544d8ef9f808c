//===- par-pipeline-sim.cpp - Simulate and verify pipeline schedules ------===//
//
// Builds a pipeline schedule's global timetable, derives the per-rank
// programs, verifies them under blocking send/recv and prints the metrics
// next to the published formulas; or verifies a program file; or sweeps
// every small shape (docs/RationalePipeline.md).
//
//   par-pipeline-sim --schedule 1f1b -p 4 -m 8 [--diagram]
//   par-pipeline-sim --schedule zbh1 -p 4 -m 8 --programs > plan.txt
//   par-pipeline-sim --verify-file plan.txt
//   par-pipeline-sim --sweep [-p 8 -m 16 -v 4]
//
// Every bad input ends in "par-pipeline-sim: error: ..." and exit code 1.
//
//===----------------------------------------------------------------------===//

#include "par/Manifest/Json.h"
#include "par/Pipelining/Schedule.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace par::pipeline;
using par::jsonQuote;

namespace {

const char *kUsage =
    "usage: par-pipeline-sim --schedule gpipe|1f1b|interleaved|zbh1|zbv -p N"
    " -m M [-v V]\n"
    "                        [--tf X --tb X --tbi X --tbw X --comm X]"
    " [--stage-costs LIST]\n"
    "                        [--diagram] [--programs] [--json] [--buffered]\n"
    "       par-pipeline-sim --verify-file FILE [cost options] [--diagram]"
    " [--json] [--buffered]\n"
    "       par-pipeline-sim --sweep [--schedule S] [-p MAXP] [-m MAXM]"
    " [-v MAXV] [cost options]\n"
    "\n"
    "  --schedule S     gpipe, 1f1b, interleaved (Megatron, v chunks per rank,"
    " m % p == 0)\n"
    "                   zbh1 (zero-bubble H1: backward split into BI and"
    " BW) or zbv\n"
    "                   (zero-bubble V: two chunks per rank in a V, BI and"
    " BW)\n"
    "  -p, -m, -v       ranks, micro-batches, chunks per rank (v > 1 only for"
    " interleaved,\n"
    "                   which defaults to v=2, and zbv, which needs v=2)\n"
    "  --tf --tb --tbi --tbw --comm\n"
    "                   action costs (default 1, 2, 1, 1, 0); T_B = T_BI +"
    " T_BW\n"
    "  --stage-costs L  each stage's own costs, stage 0 first: F:B,F:B,..."
    " (or F:BI:BW\n"
    "                   for zbh1 and zbv); the uniform costs become their"
    " means\n"
    "  --diagram        add a timeline: one line per rank, one column per time"
    " unit\n"
    "  --programs       print the per-rank programs (the --verify-file"
    " format) instead\n"
    "  --json           print the report as JSON\n"
    "  --buffered       par-run's CPU sends (each waits only for its rank's"
    " earlier\n"
    "                   sends to be received): the programs with their"
    " receives moved\n"
    "                   to their readers, verified so (else the stored ones);"
    " with\n"
    "                   --verify-file, the file's programs verified so;"
    " and what\n"
    "                   par-run's CPU runtime runs: the programs with their"
    " receives\n"
    "                   started in place and waited for by their readers\n"
    "  --posted         with --verify-file: the file's programs verified"
    " under those\n"
    "                   posted receives (and --buffered's sends)\n"
    "  --verify-file F  verify hand-written programs (exit 1 on a deadlock or"
    " any error)\n"
    "  --sweep          build and verify every schedule for p=1..MAXP (8),"
    " m=1..MAXM (16),\n"
    "                   v=1..MAXV (4), checking the formulas where they"
    " hold\n";

int fail(const std::string &message) {
  std::fprintf(stderr, "par-pipeline-sim: error: %s\n", message.c_str());
  return 1;
}

std::string num(double x) { return formatNumber(x); }

std::string fixed(double x) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6f", x);
  return buf;
}

std::string jsonNumber(double x) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.10g", x);
  return buf;
}

bool near(double a, double b) { return std::fabs(a - b) <= 1e-9 * (1 + std::fabs(b)); }

struct Options {
  bool haveSchedule = false;
  ScheduleKind kind = ScheduleKind::OneFOneB;
  long p = -1, m = -1, v = -1;
  Costs costs;
  bool haveTb = false, haveTbi = false, haveTbw = false;
  std::string stageCosts; // --stage-costs, parsed once the shape is known
  bool diagram = false, programs = false, json = false, sweep = false;
  bool buffered = false; // --buffered
  bool posted = false;   // --posted
  std::string verifyFile;
};

bool parseInt(const std::string &flag, const std::string &text, long &out,
              std::string &error) {
  char *end = nullptr;
  errno = 0;
  long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || value < -1000000000L ||
      value > 1000000000L) {
    error = flag + " expects a whole number, got '" + text + "'";
    return false;
  }
  out = value;
  return true;
}

bool parseReal(const std::string &flag, const std::string &text, double &out,
               std::string &error) {
  char *end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(value)) {
    error = flag + " expects a number, got '" + text + "'";
    return false;
  }
  out = value;
  return true;
}

/// Parses argv; returns "" or a message. Sets `help` for --help.
std::string parseArgs(int argc, char **argv, Options &o, bool &help) {
  std::string error;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    bool inlineValue = false;
    size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      inlineValue = true;
    }
    auto takeValue = [&]() -> bool {
      if (inlineValue)
        return true;
      if (i + 1 >= argc) {
        error = "option " + arg + " needs a value";
        return false;
      }
      value = argv[++i];
      return true;
    };
    auto flagOnly = [&](bool &flag) {
      if (inlineValue) {
        error = "option " + arg + " takes no value";
        return false;
      }
      flag = true;
      return true;
    };
    if (arg == "-h" || arg == "--help") {
      help = true;
      return "";
    }
    bool ok = true;
    if (arg == "--schedule") {
      ok = takeValue();
      if (ok && !parseScheduleKind(value, o.kind))
        return "unknown schedule '" + value +
               "' (expected gpipe, 1f1b, interleaved, zbh1 or zbv)";
      o.haveSchedule = true;
    } else if (arg == "-p" || arg == "--p") {
      ok = takeValue() && parseInt("-p", value, o.p, error);
    } else if (arg == "-m" || arg == "--m") {
      ok = takeValue() && parseInt("-m", value, o.m, error);
    } else if (arg == "-v" || arg == "--v") {
      ok = takeValue() && parseInt("-v", value, o.v, error);
    } else if (arg == "--tf") {
      ok = takeValue() && parseReal(arg, value, o.costs.f, error);
    } else if (arg == "--tb") {
      ok = takeValue() && parseReal(arg, value, o.costs.b, error);
      o.haveTb = true;
    } else if (arg == "--tbi") {
      ok = takeValue() && parseReal(arg, value, o.costs.bi, error);
      o.haveTbi = true;
    } else if (arg == "--tbw") {
      ok = takeValue() && parseReal(arg, value, o.costs.bw, error);
      o.haveTbw = true;
    } else if (arg == "--stage-costs") {
      ok = takeValue();
      o.stageCosts = value;
      if (ok && value.empty())
        return "--stage-costs needs a list (F:B,F:B,... or F:BI:BW,...)";
    } else if (arg == "--comm") {
      ok = takeValue() && parseReal(arg, value, o.costs.comm, error);
    } else if (arg == "--verify-file") {
      ok = takeValue();
      o.verifyFile = value;
      if (ok && value.empty())
        return "--verify-file needs a file name";
    } else if (arg == "--diagram") {
      ok = flagOnly(o.diagram);
    } else if (arg == "--programs") {
      ok = flagOnly(o.programs);
    } else if (arg == "--buffered") {
      ok = flagOnly(o.buffered);
    } else if (arg == "--posted") {
      ok = flagOnly(o.posted);
    } else if (arg == "--json") {
      ok = flagOnly(o.json);
    } else if (arg == "--sweep") {
      ok = flagOnly(o.sweep);
    } else {
      return "unknown option '" + std::string(argv[i]) +
             "' (--help lists the options)";
    }
    if (!ok)
      return error;
  }
  // T_B = T_BI + T_BW, whichever of them were given.
  Costs &c = o.costs;
  if (o.haveTb && o.haveTbi && o.haveTbw) {
    if (!near(c.b, c.bi + c.bw))
      return "--tb " + num(c.b) + " must equal --tbi + --tbw (" +
             num(c.bi + c.bw) + ")";
  } else if (o.haveTb && o.haveTbi) {
    c.bw = c.b - c.bi;
  } else if (o.haveTb && o.haveTbw) {
    c.bi = c.b - c.bw;
  } else if (o.haveTb) {
    c.bi = c.bw = c.b / 2;
  } else {
    c.b = c.bi + c.bw;
  }
  return "";
}

/// --stage-costs' list into costs.stages, for a shape whose backward is
/// split or not; the uniform costs become the stages' means.
std::string applyStageCosts(const std::string &list,
                            const PipelineShape &shape, Costs &c) {
  if (list.empty())
    return "";
  c.stages.clear();
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    std::string item = list.substr(start, end == std::string::npos
                                              ? std::string::npos
                                              : end - start);
    std::vector<double> v;
    size_t at = 0;
    std::string error;
    while (at <= item.size()) {
      size_t colon = item.find(':', at);
      std::string text = item.substr(
          at, colon == std::string::npos ? std::string::npos : colon - at);
      double x = 0;
      if (!parseReal("--stage-costs", text, x, error))
        return error + " (in stage " + std::to_string(c.stages.size()) +
               "'s '" + item + "')";
      v.push_back(x);
      if (colon == std::string::npos)
        break;
      at = colon + 1;
    }
    size_t want = shape.splitBackward ? 3 : 2;
    if (v.size() != want)
      return "--stage-costs: stage " + std::to_string(c.stages.size()) +
             " has '" + item + "'; " + getScheduleName(ScheduleKind::ZBH1) +
             " and zbv take F:BI:BW per stage, the others F:B";
    StageCosts k;
    k.f = v[0];
    if (shape.splitBackward) {
      k.bi = v[1];
      k.bw = v[2];
      k.b = k.bi + k.bw;
    } else {
      k.b = v[1];
      k.bi = k.bw = k.b / 2;
    }
    c.stages.push_back(k);
    if (end == std::string::npos)
      break;
    start = end + 1;
  }
  c.takeStageMeans();
  return "";
}

std::string costsText(const PipelineShape &shape, const Costs &c) {
  std::string s;
  if (!c.stages.empty()) {
    s = "per stage (F:" + std::string(shape.splitBackward ? "BI:BW" : "B") +
        ") ";
    for (size_t i = 0; i < c.stages.size(); ++i) {
      const StageCosts &k = c.stages[i];
      s += (i ? "," : "") + num(k.f) + ":" +
           (shape.splitBackward ? num(k.bi) + ":" + num(k.bw) : num(k.b));
    }
    s += ", means ";
  }
  s += "T_F=" + num(c.f);
  if (shape.splitBackward)
    s += " T_BI=" + num(c.bi) + " T_BW=" + num(c.bw);
  else
    s += " T_B=" + num(c.b);
  return s + " T_comm=" + num(c.comm);
}

std::string peaksText(const std::vector<int> &peaks) {
  std::string s;
  for (size_t r = 0; r < peaks.size(); ++r)
    s += (r ? " " : "") + std::to_string(peaks[r]);
  return s;
}

std::string verdict(bool match, const Expected &e) {
  if (match)
    return "match";
  return e.exact ? "MISMATCH" : "differs; the formula holds for " + e.scope;
}

/// The measured figures shared by generated schedules and program files.
void printMetrics(const PipelineShape &shape, const Metrics &mt,
                  const Expected *e) {
  std::printf("makespan: %s\n", num(mt.makespan).c_str());
  std::printf("busy: %s of %s rank-time units\n", num(mt.busy).c_str(),
              num(shape.p * mt.makespan).c_str());
  std::printf("bubble fraction (idle/total): %s", fixed(mt.bubbleFraction).c_str());
  if (near(mt.idle, std::round(mt.idle)) &&
      near(shape.p * mt.makespan, std::round(shape.p * mt.makespan)))
    std::printf(" = %s/%s", num(mt.idle).c_str(),
                num(shape.p * mt.makespan).c_str());
  std::printf("\n");
  if (e)
    std::printf("  expected %s = %s: %s\n", e->fractionFormula.c_str(),
                fixed(e->fraction).c_str(),
                verdict(near(mt.bubbleFraction, e->fraction), *e).c_str());
  std::printf("bubble ratio (idle/ideal): %s\n", fixed(mt.bubbleRatio).c_str());
  if (e)
    std::printf("  expected %s = %s: %s\n", e->ratioFormula.c_str(),
                fixed(e->ratio).c_str(),
                verdict(near(mt.bubbleRatio, e->ratio), *e).c_str());
  std::printf("peak activations per rank: %s\n",
              peaksText(mt.peakActivations).c_str());
  if (e && e->peakIsCap) {
    int most = *std::max_element(mt.peakActivations.begin(),
                                 mt.peakActivations.end());
    std::printf("  cap on every rank: %s = %d: %s\n", e->peakFormula.c_str(),
                e->peakRank0, most <= e->peakRank0 ? "within" : "ABOVE");
  } else if (e) {
    std::printf("  expected on rank 0: %s = %d: %s\n", e->peakFormula.c_str(),
                e->peakRank0,
                mt.peakActivations[0] == e->peakRank0 ? "match" : "MISMATCH");
  }
  if (shape.v > 1)
    std::printf("peak activations per rank in micro-batches (chunks / v): ");
  for (size_t r = 0; shape.v > 1 && r < mt.peakActivations.size(); ++r)
    std::printf("%s%s", r ? " " : "",
                num(double(mt.peakActivations[r]) / shape.v).c_str());
  if (shape.v > 1)
    std::printf("\n");
}

void printVerdict(const VerifyResult &vr, bool buffered = false,
                  bool posted = false) {
  if (vr.ok && posted)
    std::printf("verify: ok: %u transfers matched under buffered sends and "
                "receives started in place (each channel in order), no "
                "deadlock; makespan %s\n",
                vr.transfers, num(vr.blockingMakespan).c_str());
  else if (vr.ok && buffered)
    std::printf("verify: ok: %u transfers matched under buffered sends "
                "(each channel in order), no deadlock; makespan %s\n",
                vr.transfers, num(vr.blockingMakespan).c_str());
  else if (vr.ok)
    std::printf("verify: ok: %u transfers matched under blocking send/recv "
                "(rendezvous), no deadlock; blocking makespan %s\n",
                vr.transfers, num(vr.blockingMakespan).c_str());
  else
    std::printf("verify: FAILED with %zu error%s (on stderr)\n",
                vr.errors.size(), vr.errors.size() == 1 ? "" : "s");
  std::fflush(stdout);
}

std::string jsonTimetable(const Timetable &tt) {
  std::string s = "[";
  for (size_t r = 0; r < tt.ranks.size(); ++r) {
    s += r ? ",[" : "[";
    for (size_t i = 0; i < tt.ranks[r].size(); ++i) {
      const TimedAction &t = tt.ranks[r][i];
      std::string name = formatAction(t.action);
      s += (i ? "," : "") + std::string("{\"op\":") +
           jsonQuote(name.substr(0, name.find('('))) +
           ",\"mb\":" + std::to_string(t.action.mb) +
           ",\"stage\":" + std::to_string(t.action.stage) +
           ",\"start\":" + jsonNumber(t.start) +
           ",\"end\":" + jsonNumber(t.end) + "}";
    }
    s += "]";
  }
  return s + "]";
}

std::string jsonMetrics(const Metrics &mt) {
  std::string peaks = "[";
  for (size_t r = 0; r < mt.peakActivations.size(); ++r)
    peaks += (r ? "," : "") + std::to_string(mt.peakActivations[r]);
  return "\"makespan\":" + jsonNumber(mt.makespan) +
         ",\"busy\":" + jsonNumber(mt.busy) +
         ",\"idle\":" + jsonNumber(mt.idle) +
         ",\"bubble_fraction\":" + jsonNumber(mt.bubbleFraction) +
         ",\"bubble_ratio\":" + jsonNumber(mt.bubbleRatio) +
         ",\"peak_activations\":" + peaks + "]";
}

std::string jsonVerify(const VerifyResult &vr) {
  std::string errors = "[";
  for (size_t i = 0; i < vr.errors.size(); ++i)
    errors += (i ? "," : "") + jsonQuote(vr.errors[i]);
  return "{\"ok\":" + std::string(vr.ok ? "true" : "false") +
         ",\"transfers\":" + std::to_string(vr.transfers) +
         ",\"blocking_makespan\":" + jsonNumber(vr.blockingMakespan) +
         ",\"errors\":" + errors + "]}";
}

std::string jsonShape(const PipelineShape &s, const Costs &c) {
  return "\"p\":" + std::to_string(s.p) + ",\"m\":" + std::to_string(s.m) +
         ",\"v\":" + std::to_string(s.v) + ",\"backward\":\"" +
         (s.splitBackward ? "split" : "full") + "\",\"costs\":{\"f\":" +
         jsonNumber(c.f) + ",\"b\":" + jsonNumber(c.b) +
         ",\"bi\":" + jsonNumber(c.bi) + ",\"bw\":" + jsonNumber(c.bw) +
         ",\"comm\":" + jsonNumber(c.comm) + "}";
}

//===----------------------------------------------------------------------===//
// Modes
//===----------------------------------------------------------------------===//

/// ZB-V against ZB-H1 on the same model: one stage per rank, each two of
/// ZB-V's chunks, so every action costs twice as much.
bool zbh1OfSameModel(const ScheduleConfig &zbv, Timetable &tt) {
  ScheduleConfig h1;
  h1.kind = ScheduleKind::ZBH1;
  h1.shape.p = zbv.shape.p;
  h1.shape.m = zbv.shape.m;
  h1.costs = zbv.costs;
  h1.costs.f *= 2;
  h1.costs.b *= 2;
  h1.costs.bi *= 2;
  h1.costs.bw *= 2;
  // Per-stage costs: H1's stage r is the V model's stages 2r and 2r+1.
  h1.costs.stages.clear();
  for (size_t s = 0; s + 1 < zbv.costs.stages.size(); s += 2) {
    StageCosts a = zbv.costs.stages[s], b = zbv.costs.stages[s + 1];
    a.f += b.f;
    a.b += b.b;
    a.bi += b.bi;
    a.bw += b.bw;
    h1.costs.stages.push_back(a);
  }
  std::string error;
  return buildTimetable(h1, tt, error);
}

void printAgainstZBH1(const ScheduleConfig &config, const Metrics &mt) {
  Timetable h1;
  if (!zbh1OfSameModel(config, h1))
    return;
  Metrics hm = computeMetrics(h1);
  std::printf("zbh1 on the same model (one stage per rank, two of zbv's "
              "chunks each): "
              "makespan %s, bubble ratio %s, peak activations on rank 0 %d "
              "(= %d chunks); zbv/zbh1 makespan %s\n",
              num(hm.makespan).c_str(), fixed(hm.bubbleRatio).c_str(),
              hm.peakActivations[0], 2 * hm.peakActivations[0],
              fixed(mt.makespan / hm.makespan).c_str());
}

int runSchedule(const Options &o) {
  if (o.programs && (o.json || o.diagram))
    return fail("--programs prints only the programs; drop --json and "
                "--diagram");
  if (!o.haveSchedule)
    return fail("no --schedule given (gpipe, 1f1b, interleaved, zbh1 or zbv)");
  if (o.p == -1 || o.m == -1)
    return fail("both -p (ranks) and -m (micro-batches) are required");
  ScheduleConfig config;
  config.kind = o.kind;
  config.shape.p = static_cast<int>(o.p);
  config.shape.m = static_cast<int>(o.m);
  config.shape.v = o.v != -1 ? static_cast<int>(o.v)
                   : o.kind == ScheduleKind::Interleaved ||
                           o.kind == ScheduleKind::ZBV
                       ? 2
                       : 1;
  config.costs = o.costs;
  if (o.p != config.shape.p || o.m != config.shape.m)
    return fail("-p/-m out of range");
  std::string error = validateConfig(config);
  if (error.empty() && !o.stageCosts.empty()) {
    error = applyStageCosts(o.stageCosts, config.shape, config.costs);
    if (error.empty())
      error = validateConfig(config);
  }
  if (!error.empty())
    return fail(error);
  Timetable tt;
  if (!simulateTimetable(config.shape,
                         buildComputeOrders(config.kind, config.shape,
                                            config.costs),
                         config.costs, tt, error))
    return fail("internal: " + error);
  Programs programs = derivePrograms(tt);
  VerifyResult vr = verifyPrograms(config.shape, programs, config.costs);
  // --buffered: what par-run's CPU runtime runs: the receives at their
  // readers (sinkReceives) where that completes under its sends, else the
  // stored programs, which must.
  VerifyResult bvr;
  std::string stored; // why the stored order runs ("" if it does not)
  RuntimePrograms cpu;
  if (o.buffered) {
    RuntimePrograms run =
        blockingReceivePrograms(config.shape, programs, config.costs);
    cpu = cpuRuntimePrograms(config.shape, programs, config.costs);
    stored = run.why;
    bvr = run.verified;
    if (!bvr.ok)
      vr = bvr;
    else if (!cpu.verified.ok)
      vr = cpu.verified;
    else if (o.programs)
      programs = run.programs;
  }
  if (o.programs) {
    std::printf("# %s p=%d m=%d v=%d, %s\n", getScheduleName(config.kind),
                config.shape.p, config.shape.m, config.shape.v,
                costsText(config.shape, config.costs).c_str());
    std::printf("%s", printPrograms(config.shape, programs).c_str());
  } else if (o.json) {
    Metrics mt = computeMetrics(tt);
    Expected e = expectedFigures(config);
    std::printf(
        "{\"schedule\":%s,%s,%s,\"expected\":{\"bubble_fraction\":%s,"
        "\"bubble_ratio\":%s,\"fraction_formula\":%s,\"ratio_formula\":%s,"
        "\"peak_rank0\":%d,\"exact\":%s},\"verify\":%s,\"timetable\":%s%s}\n",
        jsonQuote(getScheduleName(config.kind)).c_str(),
        jsonShape(config.shape, config.costs).c_str(),
        jsonMetrics(mt).c_str(), jsonNumber(e.fraction).c_str(),
        jsonNumber(e.ratio).c_str(), jsonQuote(e.fractionFormula).c_str(),
        jsonQuote(e.ratioFormula).c_str(), e.peakRank0,
        e.exact ? "true" : "false", jsonVerify(vr).c_str(),
        jsonTimetable(tt).c_str(),
        o.diagram ? (",\"diagram\":" + jsonQuote(renderDiagram(tt))).c_str()
                  : "");
  } else {
    Metrics mt = computeMetrics(tt);
    Expected e = expectedFigures(config);
    std::printf("schedule: %s p=%d m=%d v=%d (%d stages)\n",
                getScheduleName(config.kind), config.shape.p, config.shape.m,
                config.shape.v, config.shape.numStages());
    std::printf("costs: %s\n", costsText(config.shape, config.costs).c_str());
    printMetrics(config.shape, mt, &e);
    if (config.kind == ScheduleKind::ZBV)
      printAgainstZBH1(config, mt);
    printVerdict(vr);
    if (o.buffered && bvr.ok && stored.empty())
      std::printf("buffered sends, receives at their readers: ok: %u "
                  "transfers, no deadlock; makespan %s\n",
                  bvr.transfers, num(bvr.blockingMakespan).c_str());
    else if (o.buffered && bvr.ok)
      std::printf("buffered sends, receives at their readers: %s; the "
                  "stored order runs: ok: %u transfers, no deadlock; "
                  "makespan %s\n",
                  stored.c_str(), bvr.transfers,
                  num(bvr.blockingMakespan).c_str());
    if (o.buffered && cpu.posted)
      std::printf("par-run's CPU runtime: receives started in place, waited "
                  "for by their readers: ok: %u transfers, no deadlock; "
                  "makespan %s\n",
                  cpu.verified.transfers,
                  num(cpu.verified.blockingMakespan).c_str());
    else if (o.buffered)
      std::printf("par-run's CPU runtime: %s\n", cpu.why.c_str());
    if (o.diagram)
      std::printf("%s", renderDiagram(tt).c_str());
  }
  if (!vr.ok) {
    for (const std::string &message : vr.errors)
      fail("internal: generated programs: " + message);
    return 1;
  }
  return 0;
}

int runVerifyFile(const Options &o) {
  if (o.haveSchedule || o.p != -1 || o.m != -1 || o.v != -1 || o.programs ||
      o.sweep)
    return fail("--verify-file takes the shape from the file's pipeline "
                "header; drop --schedule, -p, -m, -v, --programs and --sweep");
  std::ifstream in(o.verifyFile, std::ios::binary);
  if (!in)
    return fail("cannot open '" + o.verifyFile + "'");
  std::stringstream buffer;
  buffer << in.rdbuf();
  PipelineShape shape;
  Programs programs;
  std::string error;
  if (!parsePrograms(buffer.str(), o.verifyFile, shape, programs, error))
    return fail(error);
  VerifyResult vr = verifyPrograms(
      shape, programs, o.costs,
      o.posted     ? Transfers::Posted
      : o.buffered ? Transfers::Buffered
                   : Transfers::Rendezvous);
  Timetable tt;
  bool haveTimetable =
      vr.ok && simulateTimetable(shape, computeOnly(programs), o.costs, tt,
                                 error);
  if (o.json) {
    std::printf("{\"file\":%s,%s,\"verify\":%s", jsonQuote(o.verifyFile).c_str(),
                jsonShape(shape, o.costs).c_str(), jsonVerify(vr).c_str());
    if (haveTimetable)
      std::printf(",%s,\"timetable\":%s", jsonMetrics(computeMetrics(tt)).c_str(),
                  jsonTimetable(tt).c_str());
    std::printf("}\n");
  } else {
    std::printf("programs: %s: p=%d m=%d v=%d backward=%s placement=%s\n",
                o.verifyFile.c_str(), shape.p, shape.m, shape.v,
                shape.splitBackward ? "split" : "full",
                shape.vShape ? "v" : "loop");
    std::printf("costs: %s\n", costsText(shape, o.costs).c_str());
    if (haveTimetable)
      printMetrics(shape, computeMetrics(tt), nullptr);
    printVerdict(vr, o.buffered || o.posted, o.posted);
    if (haveTimetable && o.diagram)
      std::printf("%s", renderDiagram(tt).c_str());
  }
  if (vr.ok)
    return 0;
  for (const std::string &message : vr.errors)
    fail(o.verifyFile + ": " + message);
  return 1;
}

/// Builds and verifies every schedule up to the given sizes, and checks the
/// published bubble formulas wherever Expected::exact says they hold.
int runSweep(const Options &o) {
  if (o.programs || o.json || o.diagram)
    return fail("--sweep prints a summary only; drop --programs, --json and "
                "--diagram");
  long maxP = o.p == -1 ? 8 : o.p, maxM = o.m == -1 ? 16 : o.m,
       maxV = o.v == -1 ? 4 : o.v;
  if (maxP < 1 || maxM < 1 || maxV < 1 || maxP * maxV > 256 || maxM > 256)
    return fail("--sweep needs 1 <= -p*-v <= 256 and 1 <= -m <= 256");
  const Costs &c = o.costs;
  std::vector<ScheduleKind> kinds = {ScheduleKind::GPipe,
                                     ScheduleKind::OneFOneB,
                                     ScheduleKind::Interleaved,
                                     ScheduleKind::ZBH1, ScheduleKind::ZBV};
  if (o.haveSchedule)
    kinds = {o.kind};
  unsigned failures = 0, formulaChecks = 0, storedOrder = 0,
           postedSlower = 0;
  std::string counts;
  for (ScheduleKind kind : kinds) {
    unsigned built = 0;
    for (long p = 1; p <= maxP; ++p) {
      for (long m = 1; m <= maxM; ++m) {
        long firstV = kind == ScheduleKind::ZBV ? 2 : 1;
        long lastV = kind == ScheduleKind::Interleaved ? maxV : firstV;
        for (long v = firstV; v <= lastV; ++v) {
          ScheduleConfig config;
          config.kind = kind;
          config.shape.p = static_cast<int>(p);
          config.shape.m = static_cast<int>(m);
          config.shape.v = static_cast<int>(v);
          config.costs = c;
          if (kind == ScheduleKind::Interleaved && m % p != 0)
            continue;
          std::string where = std::string(getScheduleName(kind)) +
                              " p=" + std::to_string(p) +
                              " m=" + std::to_string(m) +
                              " v=" + std::to_string(v) + ": ";
          auto report = [&](const std::string &message) {
            if (++failures <= 20)
              std::printf("sweep: FAIL %s%s\n", where.c_str(), message.c_str());
          };
          Timetable tt;
          std::string error;
          if (!buildTimetable(config, tt, error)) {
            report(error);
            continue;
          }
          ++built;
          validateConfig(config); // sets shape.splitBackward for this copy
          Programs programs = derivePrograms(tt);
          VerifyResult vr = verifyPrograms(config.shape, programs, c);
          if (!vr.ok)
            report(vr.errors.front());
          Programs orders(p);
          for (long r = 0; r < p; ++r)
            for (const TimedAction &t : tt.ranks[r])
              orders[r].push_back(t.action);
          if (computeOnly(programs) != orders)
            report("the programs' compute order differs from the timetable");
          if (vr.ok && vr.blockingMakespan + 1e-9 < tt.makespan)
            report("blocking makespan " + num(vr.blockingMakespan) +
                   " below the timetable's " + num(tt.makespan));
          // What par-run's CPU runtime runs: the receives at their readers
          // where that completes under its sends (Transfers::Buffered),
          // else the stored programs. With one stage per rank the moved
          // programs must complete, keep the compute order and run in the
          // timetable's time (no receive waits before its reader needs
          // it); with several, the stored ones must complete when the
          // moved ones do not.
          RuntimePrograms run =
              blockingReceivePrograms(config.shape, programs, c);
          const VerifyResult &bvr = run.verified;
          if (!run.moved && v == 1)
            report("receives at their readers: " + run.why);
          else if (!bvr.ok)
            report("the stored programs under buffered sends: " +
                   bvr.errors.front());
          else if (!run.moved)
            ++storedOrder;
          else if (computeOnly(run.programs) != orders)
            report("sinking the receives changed the compute order");
          else if (v == 1 &&
                   std::abs(bvr.blockingMakespan - tt.makespan) > 1e-9)
            report("buffered makespan " + num(bvr.blockingMakespan) +
                   " differs from the timetable's " + num(tt.makespan));
          // What it runs: the stored programs with their receives started
          // in place and waited for by their readers, which must complete
          // for every program, in the timetable's time with one stage per
          // rank and never slower than the blocking receives.
          RuntimePrograms cpu = cpuRuntimePrograms(config.shape, programs, c);
          const VerifyResult &pvr = cpu.verified;
          if (!cpu.posted)
            report("par-run's CPU runtime: " + cpu.why);
          else if (v == 1 &&
                   std::abs(pvr.blockingMakespan - tt.makespan) > 1e-9)
            report("posted-receive makespan " + num(pvr.blockingMakespan) +
                   " differs from the timetable's " + num(tt.makespan));
          else if (bvr.ok &&
                   pvr.blockingMakespan > bvr.blockingMakespan + 1e-9)
            report("posted-receive makespan " + num(pvr.blockingMakespan) +
                   " above the blocking receives' " +
                   num(bvr.blockingMakespan));
          else if (pvr.blockingMakespan > tt.makespan + 1e-9)
            ++postedSlower;
          Metrics mt = computeMetrics(tt);
          Expected e = expectedFigures(config);
          for (size_t r = 0; r < mt.peakActivations.size(); ++r) {
            int peak = mt.peakActivations[r];
            if (e.peakIsCap ? peak > e.peakRank0
                            : r == 0 && peak != e.peakRank0)
              report("peak activations on rank " + std::to_string(r) + " " +
                     std::to_string(peak) +
                     (e.peakIsCap ? ", above the cap " : ", expected ") +
                     e.peakFormula + " = " + std::to_string(e.peakRank0));
          }
          // ZB-V's claim: ZB-H1's memory (2p chunks) and no more time, in
          // the paper's setting (T_F = T_BI = T_BW, free transfers: ZB-V
          // crosses ranks twice as often).
          Timetable h1;
          bool paperCosts = c.comm == 0 && c.f == c.bi && c.bi == c.bw;
          if (kind == ScheduleKind::ZBV && paperCosts &&
              zbh1OfSameModel(config, h1) &&
              tt.makespan > h1.makespan + 1e-9)
            report("makespan " + num(tt.makespan) + " above zbh1's " +
                   num(h1.makespan) + " on the same model");
          if (e.exact) {
            ++formulaChecks;
            if (!near(mt.bubbleRatio, e.ratio))
              report("bubble ratio " + fixed(mt.bubbleRatio) + ", expected " +
                     e.ratioFormula + " = " + fixed(e.ratio));
          }
        }
      }
    }
    counts += (counts.empty() ? "" : ", ") + std::string(getScheduleName(kind)) +
              " " + std::to_string(built);
  }
  std::printf("sweep: p=1..%ld m=1..%ld v=1..%ld, %s; costs T_F=%s T_B=%s "
              "T_BI=%s T_BW=%s T_comm=%s\n",
              maxP, maxM, maxV, counts.c_str(), num(c.f).c_str(),
              num(c.b).c_str(), num(c.bi).c_str(), num(c.bw).c_str(),
              num(c.comm).c_str());
  if (failures)
    return fail("sweep: " + std::to_string(failures) + " failures");
  std::printf("sweep: all verified deadlock-free under blocking send/recv; "
              "programs follow the timetable; under buffered sends, with "
              "the receives at their readers deadlock-free (one stage per "
              "rank: in the timetable's time), else in the stored order "
              "(%u programs of several stages per rank); with the receives "
              "started in place (par-run's CPU runtime) every program "
              "deadlock-free, never slower than the blocking receives, in "
              "the timetable's time but for %u of several stages per rank; "
              "peak activations match",
              storedOrder, postedSlower);
  std::printf("; bubble formula matched on %u", formulaChecks);
  std::printf("\n");
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  bool help = false;
  std::string error = parseArgs(argc, argv, o, help);
  if (help) {
    std::printf("%s", kUsage);
    return 0;
  }
  if (!error.empty())
    return fail(error);
  if (!o.stageCosts.empty() && (!o.verifyFile.empty() || o.sweep))
    return fail("--stage-costs goes with --schedule only (not --verify-file "
                "or --sweep)");
  if (!o.verifyFile.empty())
    return runVerifyFile(o);
  if (o.sweep)
    return runSweep(o);
  return runSchedule(o);
}

//===- Configuration.cpp - Parse, check and print configurations ----------===//

#include "par/Planning/Configuration.h"
#include "par/Planning/ModelProfile.h"
#include "par/Pipelining/Schedule.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/StringSwitch.h"

#include <sstream>

using namespace mlir::par::planning;

std::string Configuration::str() const {
  std::ostringstream os;
  os << "dp=" << dp << " tp=" << tp << " pp=" << pp << " v=" << v
     << " m=" << m << " zero=" << zero << " recompute=" << recompute
     << " sequence-parallel=" << (sequenceParallel ? "true" : "false")
     << " schedule=" << schedule << " precision=" << precision;
  if (gradReduce != "f32")
    os << " grad-reduce=" << gradReduce;
  if (!stash)
    os << " stash=false";
  return os.str();
}

std::string Configuration::compileOptions() const {
  std::ostringstream os;
  os << "optimizer=adamw micro-batches=" << m;
  if (precision != "f32")
    os << " precision=" << precision;
  if (pp > 1) {
    os << " stages=" << pp * v << " schedule=" << schedule;
    if (v > 1)
      os << " virtual=" << v;
  }
  if (zero)
    os << " zero=" << zero;
  if (recompute != "none")
    os << " recompute=" << recompute;
  if (sequenceParallel)
    os << " sequence-parallel=true";
  if (gradReduce != "f32" && precision != "f32")
    os << " grad-reduce=" << gradReduce;
  if (!stash && pp > 1)
    os << " stash=false";
  return os.str();
}

std::string Configuration::meshLine() const {
  std::ostringstream os;
  os << "dp=" << dp << " tp=" << tp << " pp=" << pp;
  return os.str();
}

static bool parseInt(llvm::StringRef value, int64_t &out) {
  return !value.getAsInteger(10, out) && out >= 0;
}

bool mlir::par::planning::parseConfiguration(const std::string &text,
                                             Configuration &config,
                                             std::string &error) {
  llvm::SmallVector<llvm::StringRef> words;
  llvm::SplitString(text, words, " \t,");
  for (llvm::StringRef word : words) {
    auto [key, value] = word.split('=');
    if (value.empty() && !word.contains('=')) {
      error = "configuration entry '" + word.str() + "' is not KEY=VALUE";
      return false;
    }
    int64_t *slot = llvm::StringSwitch<int64_t *>(key)
                        .Case("dp", &config.dp)
                        .Case("tp", &config.tp)
                        .Case("pp", &config.pp)
                        .Case("v", &config.v)
                        .Case("m", &config.m)
                        .Case("zero", &config.zero)
                        .Default(nullptr);
    if (slot) {
      if (!parseInt(value, *slot) || (*slot == 0 && key != "zero")) {
        error = "configuration key '" + key.str() +
                "' needs a positive integer, not '" + value.str() + "'";
        return false;
      }
      if (key == "zero" && *slot > 3) {
        error = "zero=" + value.str() + ": ZeRO stages are 0, 1, 2 and 3";
        return false;
      }
      continue;
    }
    if (key == "recompute") {
      if (value != "none" && value != "selective" && value != "full") {
        error = "recompute=" + value.str() +
                ": expected none, selective or full";
        return false;
      }
      config.recompute = value.str();
    } else if (key == "sequence-parallel") {
      if (value != "true" && value != "false") {
        error = "sequence-parallel=" + value.str() + ": expected true or false";
        return false;
      }
      config.sequenceParallel = value == "true";
    } else if (key == "stash") {
      if (value != "true" && value != "false") {
        error = "stash=" + value.str() + ": expected true or false";
        return false;
      }
      config.stash = value == "true";
    } else if (key == "schedule") {
      ::par::pipeline::ScheduleKind kind;
      if (!::par::pipeline::parseScheduleKind(value.str(), kind)) {
        error = "schedule=" + value.str() +
                ": expected gpipe, 1f1b, interleaved, zbh1 or zbv";
        return false;
      }
      config.schedule = value.str();
    } else if (key == "precision") {
      if (value != "bf16" && value != "f16" && value != "f32") {
        error = "precision=" + value.str() + ": expected bf16, f16 or f32";
        return false;
      }
      config.precision = value.str();
    } else if (key == "grad-reduce") {
      if (value != "f32" && value != "compute") {
        error = "grad-reduce=" + value.str() + ": expected f32 or compute";
        return false;
      }
      config.gradReduce = value.str();
    } else {
      error = "unknown configuration key '" + key.str() +
              "' (keys: dp, tp, pp, v, m, zero, recompute, sequence-parallel, "
              "schedule, precision, grad-reduce)";
      return false;
    }
  }
  return true;
}

std::string mlir::par::planning::checkConfiguration(
    const Configuration &c, const ModelProfile &model, int64_t gpus,
    int64_t globalBatch) {
  auto str = [](int64_t x) { return std::to_string(x); };
  if (c.devices() != gpus)
    return "dp*tp*pp = " + str(c.dp) + "*" + str(c.tp) + "*" + str(c.pp) +
           " = " + str(c.devices()) + " devices, but --gpus is " + str(gpus);
  if (globalBatch % (c.dp * c.m))
    return "the global batch " + str(globalBatch) +
           " is not divisible by dp*m = " + str(c.dp * c.m);
  if (c.tp > 1) {
    if (model.tpAxis.empty())
      return "tp=" + str(c.tp) +
             ": the model has no tensor-parallel annotation on its weights";
    if (model.tpDivisor % c.tp)
      return "tp=" + str(c.tp) + " does not divide the model's tensor-parallel "
             "dimensions (largest common divisor " + str(model.tpDivisor) + ")";
    if (c.sequenceParallel && model.seq % c.tp)
      return "sequence-parallel: the sequence " + str(model.seq) +
             " is not divisible by tp=" + str(c.tp);
  } else if (c.sequenceParallel) {
    return "sequence-parallel needs tp > 1";
  }
  if (c.pp * c.v > model.layers)
    return "pp*v = " + str(c.pp * c.v) + " stages for " + str(model.layers) +
           " layers";
  if (c.pp == 1) {
    if (c.v != 1)
      return "v=" + str(c.v) + " needs pp > 1";
    return "";
  }
  ::par::pipeline::ScheduleConfig sc;
  ::par::pipeline::parseScheduleKind(c.schedule, sc.kind);
  sc.shape.p = static_cast<int>(c.pp);
  sc.shape.m = static_cast<int>(c.m);
  sc.shape.v = static_cast<int>(c.v);
  std::string why = ::par::pipeline::validateConfig(sc);
  if (!why.empty())
    return why;
  return "";
}

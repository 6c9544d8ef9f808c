//===- Machine.cpp - Machine descriptions from JSON -----------------------===//

#include "par/Planning/Machine.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cmath>

using namespace mlir::par::planning;
namespace json = llvm::json;

double DeviceSpec::gemmEfficiencyAt(double flops) const {
  if (gemmEfficiency.empty())
    return 1.0;
  if (flops <= gemmEfficiency.front().first)
    return gemmEfficiency.front().second;
  if (flops >= gemmEfficiency.back().first)
    return gemmEfficiency.back().second;
  for (size_t i = 1; i < gemmEfficiency.size(); ++i) {
    auto [x1, y1] = gemmEfficiency[i];
    if (flops > x1)
      continue;
    auto [x0, y0] = gemmEfficiency[i - 1];
    double t = (std::log(flops) - std::log(x0)) / (std::log(x1) - std::log(x0));
    return y0 + t * (y1 - y0);
  }
  return gemmEfficiency.back().second;
}

double DeviceSpec::peakFor(const std::string &dtype) const {
  auto it = peakFlops.find(dtype);
  return it == peakFlops.end() ? 0 : it->second;
}

namespace {
/// Reads the number at `key` of `obj` (required and positive unless
/// `optional`), naming the path in errors.
struct Reader {
  std::string origin;
  std::string error;

  bool number(const json::Object &obj, const char *path, const char *key,
              double &out, bool optional = false) {
    const json::Value *v = obj.get(key);
    if (!v) {
      if (optional)
        return true;
      error = origin + ": missing " + path + key;
      return false;
    }
    std::optional<double> d = v->getAsNumber();
    if (!d || *d < 0) {
      error = origin + ": " + path + key + " must be a non-negative number";
      return false;
    }
    out = *d;
    return true;
  }
  const json::Object *object(const json::Object &obj, const char *key) {
    const json::Object *o = obj.getObject(key);
    if (!o)
      error = origin + ": missing object \"" + key + "\"";
    return o;
  }
};
} // namespace

bool mlir::par::planning::parseMachine(const std::string &text,
                                       const std::string &origin,
                                       Machine &out, std::string &error) {
  llvm::Expected<json::Value> parsed = json::parse(text);
  if (!parsed) {
    error = origin + ": " + llvm::toString(parsed.takeError());
    return false;
  }
  const json::Object *root = parsed->getAsObject();
  if (!root) {
    error = origin + ": the top level must be an object";
    return false;
  }
  Reader r{origin, {}};
  auto fail = [&] {
    error = r.error;
    return false;
  };
  Machine m;
  if (auto name = root->getString("name"))
    m.name = name->str();
  if (auto d = root->getString("description"))
    m.description = d->str();
  if (const json::Array *src = root->getArray("sources"))
    for (const json::Value &s : *src)
      if (auto str = s.getAsString())
        m.sources.push_back(str->str());

  const json::Object *dev = r.object(*root, "device");
  if (!dev)
    return fail();
  const json::Object *peaks = r.object(*dev, "peak_flops");
  if (!peaks)
    return fail();
  for (const auto &kv : *peaks) {
    std::optional<double> d = kv.second.getAsNumber();
    if (!d || *d <= 0) {
      error = origin + ": device.peak_flops." + kv.first.str() +
              " must be a positive number";
      return false;
    }
    m.device.peakFlops[kv.first.str()] = *d;
  }
  if (m.device.peakFlops.empty()) {
    error = origin + ": device.peak_flops is empty";
    return false;
  }
  if (!r.number(*dev, "device.", "vector_flops", m.device.vectorFlops) ||
      !r.number(*dev, "device.", "memory_bytes", m.device.memoryBytes) ||
      !r.number(*dev, "device.", "memory_bandwidth",
                m.device.memoryBandwidth) ||
      !r.number(*dev, "device.", "kernel_launch_s", m.device.launchSeconds) ||
      !r.number(*dev, "device.", "usable_memory_fraction",
                m.device.usableFraction, /*optional=*/true))
    return fail();
  if (const json::Array *eff = dev->getArray("gemm_efficiency")) {
    for (const json::Value &row : *eff) {
      const json::Array *pair = row.getAsArray();
      std::optional<double> x, y;
      if (pair && pair->size() == 2) {
        x = (*pair)[0].getAsNumber();
        y = (*pair)[1].getAsNumber();
      }
      if (!x || !y || *x <= 0 || *y <= 0 || *y > 1) {
        error = origin + ": device.gemm_efficiency rows are [FLOPs, fraction "
                         "in (0, 1]]";
        return false;
      }
      m.device.gemmEfficiency.push_back({*x, *y});
    }
    std::sort(m.device.gemmEfficiency.begin(), m.device.gemmEfficiency.end());
  }

  const json::Object *node = r.object(*root, "node");
  if (!node)
    return fail();
  double devices = 1;
  if (!r.number(*node, "node.", "devices", devices) ||
      !r.number(*node, "node.", "link_bandwidth", m.node.bandwidth) ||
      !r.number(*node, "node.", "link_latency_s", m.node.latency))
    return fail();
  m.devicesPerNode = std::max(1, static_cast<int>(devices));
  if (!r.number(*node, "node.", "processors", m.sharedProcessors,
                /*optional=*/true) ||
      !r.number(*node, "node.", "sync_stretch", m.syncStretch,
                /*optional=*/true))
    return fail();
  if (m.sharedProcessors < 0 ||
      (m.sharedProcessors > 0 && m.sharedProcessors >= m.devicesPerNode))
    m.sharedProcessors = 0; // as many processors as devices: none shared

  const json::Object *net = r.object(*root, "network");
  if (!net)
    return fail();
  if (!r.number(*net, "network.", "bandwidth", m.network.bandwidth) ||
      !r.number(*net, "network.", "latency_s", m.network.latency))
    return fail();
  if (auto target = root->getString("target"))
    m.target = target->str();
  if (m.target != "cpu" && m.target != "cuda") {
    error = origin + ": target \"" + m.target + "\" is not cpu or cuda";
    return false;
  }
  if (auto alg = net->getString("collective"))
    m.collectiveAlgorithm = alg->str();
  if (m.collectiveAlgorithm != "ring") {
    error = origin + ": network.collective \"" + m.collectiveAlgorithm +
            "\" is not supported (ring)";
    return false;
  }
  if (m.device.memoryBandwidth <= 0 || m.node.bandwidth <= 0 ||
      m.network.bandwidth <= 0 || m.device.vectorFlops <= 0) {
    error = origin + ": bandwidths and vector_flops must be positive";
    return false;
  }
  out = std::move(m);
  return true;
}

std::vector<std::string>
mlir::par::planning::listMachines(const std::string &machinesDir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(machinesDir, ec), end;
       it != end && !ec; it.increment(ec))
    if (llvm::sys::path::extension(it->path()) == ".json")
      names.push_back(llvm::sys::path::stem(it->path()).str());
  std::sort(names.begin(), names.end());
  return names;
}

bool mlir::par::planning::loadMachine(const std::string &nameOrPath,
                                      const std::string &machinesDir,
                                      Machine &out, std::string &error) {
  std::string path = nameOrPath;
  bool isPath = llvm::StringRef(nameOrPath).ends_with(".json") ||
                nameOrPath.find('/') != std::string::npos;
  if (!isPath) {
    llvm::SmallString<256> p(machinesDir);
    llvm::sys::path::append(p, nameOrPath + ".json");
    path = std::string(p);
    if (!llvm::sys::fs::exists(path)) {
      error = "unknown machine '" + nameOrPath + "' (known: " +
              llvm::join(listMachines(machinesDir), ", ") +
              "; or a path to a JSON file)";
      return false;
    }
  }
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer) {
    error = "cannot read machine file '" + path +
            "': " + buffer.getError().message();
    return false;
  }
  if (!parseMachine((*buffer)->getBuffer().str(), path, out, error))
    return false;
  if (out.name.empty())
    out.name = llvm::sys::path::stem(path).str();
  return true;
}

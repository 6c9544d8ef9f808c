//===- par-plan.cpp - Which parallel configuration, predicted -------------===//
//
// par-plan MODEL.mlir --machine h100 --gpus N [--global-batch B] [--seq S]
//          [--top K] [--explain [--rank R]] [--tp T] [--pp P]
//          [--config "dp=.. tp=.. ..."]
// par-plan --list-machines
//
// Profiles the model once (lib/Planning/ModelProfile: par's propagation and
// partitioning on copies), then either prices one configuration (--config:
// the `predicted:` line, then the breakdown) or searches those that fit
// and prints the best few (--explain: the breakdown of the best, or of the
// R-th), each as par-compile options. docs/Planning.md describes the model.
//
//===----------------------------------------------------------------------===//

#include "par/InitAll.h"
#include "par/Planning/Configuration.h"
#include "par/Planning/CostModel.h"
#include "par/Planning/Machine.h"
#include "par/Planning/ModelProfile.h"
#include "par/Planning/Report.h"
#include "par/Planning/Search.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>

using namespace mlir;
using namespace mlir::par::planning;
namespace cl = llvm::cl;

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("MODEL.mlir"));
static cl::opt<std::string>
    machineName("machine",
                cl::desc("a100, h100, h200, cpu-local, or a JSON file"),
                cl::init("h100"));
static cl::opt<std::string>
    machinesDir("machines-dir",
                cl::desc("Where the machine files are (default: "
                         "share/par/machines next to the tool's bin/)"),
                cl::init(""));
static cl::opt<int64_t> gpus("gpus", cl::desc("Devices"), cl::init(0));
static cl::opt<int64_t>
    globalBatch("global-batch",
                cl::desc("Samples per step (default: the model's batch)"),
                cl::init(0));
static cl::opt<int64_t>
    seq("seq", cl::desc("Sequence length (must be the model's: the "
                        "attention's cost is not linear in it)"),
        cl::init(0));
static cl::opt<std::string>
    config("config", cl::desc("Price one configuration: \"dp=.. tp=.. pp=.. "
                              "v=.. m=.. zero=.. recompute=.. "
                              "sequence-parallel=.. schedule=.. "
                              "precision=..\""),
           cl::init(""));
static cl::opt<bool> explain("explain",
                             cl::desc("The breakdown of the best "
                                      "configuration (or --rank's)"));
static cl::opt<int> rank("rank", cl::desc("With --explain: which row"),
                         cl::init(1));
static cl::opt<int> top("top", cl::desc("Rows to print"), cl::init(5));
static cl::opt<std::string>
    precision("precision",
              cl::desc("Compute type searched: bf16, f16 or f32 (default: "
                       "bf16 where the machine has it, else f32)"),
              cl::init(""));
static cl::opt<int64_t> maxMicroBatch("max-micro-batch",
                                      cl::desc("Largest micro-batch searched"),
                                      cl::init(16));
static cl::opt<int64_t> fixTP("tp", cl::desc("Search only this tp"),
                              cl::init(0));
static cl::opt<int64_t> fixPP("pp", cl::desc("Search only this pp"),
                              cl::init(0));
static cl::opt<std::string>
    entry("entry", cl::desc("The model function (default: the one taking "
                            "par.param arguments and returning the loss)"),
          cl::init(""));
static cl::opt<bool> listMachinesFlag("list-machines",
                                      cl::desc("List the shipped machines"));
static cl::opt<int> showKernels(
    "kernels", cl::desc("With --config: the N most expensive kernels of the "
                        "forward and of the gradient function"),
    cl::init(0));
static cl::opt<bool> showProfile("profile",
                                 cl::desc("Print the model's profile"));

static int fail(const std::string &message) {
  llvm::errs() << "par-plan: error: " << message << "\n";
  return 1;
}

static std::string defaultMachinesDir(const char *argv0) {
  std::string self =
      llvm::sys::fs::getMainExecutable(argv0, reinterpret_cast<void *>(&fail));
  llvm::SmallString<256> dir(llvm::sys::path::parent_path(
      llvm::sys::path::parent_path(self)));
  llvm::sys::path::append(dir, "share", "par", "machines");
  return std::string(dir);
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv,
                              "par-plan: predict and choose a parallel "
                              "configuration\n");
  std::string dir =
      machinesDir.empty() ? defaultMachinesDir(argv[0]) : machinesDir.getValue();
  if (listMachinesFlag) {
    for (const std::string &name : listMachines(dir)) {
      Machine m;
      std::string error;
      if (loadMachine(name, dir, m, error))
        llvm::outs() << name << ": " << m.description << "\n";
    }
    return 0;
  }
  if (inputFile.empty())
    return fail("no model given (par-plan MODEL.mlir --machine NAME --gpus N)");
  Machine machine;
  std::string error;
  if (!loadMachine(machineName, dir, machine, error))
    return fail(error);
  if (gpus <= 0)
    return fail("--gpus must be a positive number of devices");

  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  mlir::par::registerAllParDialects(registry);
  MLIRContext context(registry);
  context.printOpOnDiagnostic(false);
  auto start = std::chrono::steady_clock::now();
  std::unique_ptr<llvm::MemoryBuffer> input = openInputFile(inputFile, &error);
  if (!input)
    return fail("cannot open model '" + inputFile + "': " + error);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return fail("cannot parse model '" + inputFile + "'");

  ModelProfile model;
  if (!profileModel(*module, entry, model, error))
    return fail(error);
  if (seq && seq != model.seq)
    return fail("--seq " + std::to_string(seq) + " differs from the model's "
                "sequence length " + std::to_string(model.seq) +
                " (generate the model at that length)");
  int64_t batch = globalBatch ? globalBatch.getValue() : model.batch;
  if (batch <= 0)
    return fail("--global-batch must be positive");
  std::string prec = precision;
  if (prec.empty())
    prec = machine.device.peakFor("bf16") > 0 ? "bf16" : "f32";
  if (prec != "bf16" && prec != "f16" && prec != "f32")
    return fail("--precision " + prec + ": expected bf16, f16 or f32");
  if (machine.device.peakFor(prec) <= 0)
    return fail("machine '" + machine.name + "' has no peak for " + prec);
  double profileSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (showProfile)
    printProfile(llvm::outs(), model);

  if (!config.empty()) {
    Configuration c;
    c.precision = prec;
    c.dp = gpus; // a configuration without dp= gets what is left
    if (!parseConfiguration(config, c, error))
      return fail(error);
    if (config.find("dp=") == std::string::npos) {
      if (gpus % (c.tp * c.pp))
        return fail("--gpus " + std::to_string(gpus) +
                    " is not divisible by tp*pp = " +
                    std::to_string(c.tp * c.pp));
      c.dp = gpus / (c.tp * c.pp);
    }
    if (config.find("schedule=") == std::string::npos && c.v > 1)
      c.schedule = "interleaved";
    std::string why = checkConfiguration(c, model, gpus, batch);
    if (!why.empty())
      return fail("configuration " + c.str() + ": " + why);
    Estimate e;
    if (!estimate(model, machine, c, batch, e, error))
      return fail(error);
    printPredictedLine(llvm::outs(), e);
    printBreakdown(llvm::outs(), e, machine);
    if (showKernels > 0)
      printKernels(llvm::outs(), kernelTimes(model, machine, c, batch),
                   showKernels);
    return 0;
  }

  SearchOptions options;
  options.gpus = gpus;
  options.globalBatch = batch;
  options.precision = prec;
  options.maxMicroBatch = maxMicroBatch;
  options.tp = fixTP;
  options.pp = fixPP;
  SearchResult result = searchConfigurations(model, machine, options);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  llvm::outs() << "par-plan: " << result.evaluated << " configurations of @"
               << model.function << " on " << gpus << " x " << machine.name
               << " (global batch " << batch << ", sequence " << model.seq
               << ", " << prec << "), " << result.fitting.size()
               << " fit in memory; profile "
               << llvm::format("%.2f", profileSeconds) << " s, search "
               << llvm::format("%.2f", seconds - profileSeconds) << " s\n";
  if (result.fitting.empty())
    return fail("no configuration fits in " +
                llvm::formatv("{0:F2}", machine.device.memoryBytes *
                                            machine.device.usableFraction /
                                            (1024.0 * 1024 * 1024))
                    .str() +
                " GiB per device (the smallest needs " +
                llvm::formatv("{0:F2}",
                              result.smallestMemory / (1024.0 * 1024 * 1024))
                    .str() +
                " GiB)");
  std::vector<Estimate> rows(
      result.fitting.begin(),
      result.fitting.begin() +
          std::min<size_t>(result.fitting.size(), std::max(1, top.getValue())));
  printTable(llvm::outs(), rows);
  const Estimate &best = result.fitting.front();
  llvm::outs() << "best: ";
  printPredictedLine(llvm::outs(), best);
  printCompileOptions(llvm::outs(), best);
  if (explain) {
    if (rank < 1 || static_cast<size_t>(rank) > result.fitting.size())
      return fail("--rank " + std::to_string(rank) + ": only " +
                  std::to_string(result.fitting.size()) + " configurations fit");
    printBreakdown(llvm::outs(), result.fitting[rank - 1], machine);
  }
  return 0;
}

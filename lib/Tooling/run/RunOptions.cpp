//===- RunOptions.cpp - Parsing and validating par-run's options ----------===//
//
// One table-free parser (the options are few and some take two forms), then
// one validation of the combinations; nothing here reads the artifact.
//
//===----------------------------------------------------------------------===//

#include "par/Tooling/RunOptions.h"

#include "par/Runtime/par_runtime.h"
#include "par/Tooling/Diagnostics.h"
#include "par/Tooling/Launcher.h"
#include "par/Tooling/MemoryReport.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>

namespace par::tooling {

namespace {

const char kUsage[] = R"(usage: par-run -n N ARTIFACT_DIR [options]
Runs a program compiled by par-compile on N ranks (the artifact's mesh).

The job:
  -n N, --ranks N     the number of ranks (the mesh's device count)
  --hostfile FILE     start the ranks on FILE's hosts (mpirun's hostfile:
                      'host slots=K' per line); needs the artifact and
                      par-run at the same path on every host
  -H, --host LIST     start the ranks on host:slots,... (mpirun's -H)
                      Inside an mpirun or srun job par-run is the job's
                      rank: no -H/--hostfile (docs/Launch.md)
  --backend cpu|cuda  cuda runs a program compiled with par-compile --target
                      cuda (parameters and state stay in GPU memory)
  --threads T         threads per rank, for the parallel loops and the GEMMs
                      (split over them) alike (default: the host's cores
                      over its ranks, or OMP_NUM_THREADS); the ranks are
                      bound to T cores each when they fit
  --memory-limit SIZE each rank's programs may hold at most SIZE (e.g. 2GiB,
                      512MiB: their buffers and the arguments and results
                      par-run keeps), as a device of that size would; past
                      it the allocation fails naming the function, the
                      tensor and the memory plan's figure, and the job ends
  --collective-timeout SECONDS  a rank that waits longer in one collective
                      (or transfer) ends the job naming it and the ranks that
                      have not reached it (default 600; 0: never;
                      PAR_COLLECTIVE_TIMEOUT)

Inputs:
  --entry NAME        the function to run (default: the first; with --steps,
                      the train step par-compile linked to it, <f>_step)
  --input NAME=FILE.npy  NAME is argK or the input's PyTorch name (par.name
                      or an alias). .npy files have the tensor's dtype:
                      numpy's own for f64, f32, f16, i64, i32, i8, i1 (bool);
                      bf16 is '<u2', the upper 16 bits of the f32 pattern
  --seed S            the generator's seed for every input not given
  --data FILE         character-level corpus: each run/step fills the token
                      and target arguments (--tokens argK, --targets argJ;
                      default the inputs of role tokens/targets (par.data),
                      else arg0, arg1; i64 [batch, seq]) with random windows
                      of FILE. Without --data, tokens/targets inputs get
                      generated ids in [0, vocab)
  --load-weights FILE.safetensors  before the run, every input with a name
                      (par.name) takes the file's tensor of that name or one
                      of its aliases (global shape and dtype must match); a
                      segment of a fused parameter (par.slice) its slice of
                      the fused tensor

Running and training:
  --repeat K          run the program K times (after one warm-up run when
                      K > 1) and report the best and median time
  --steps N           train: run a train step (par-optimizer) N times,
                      feeding new parameters and state back, printing the
                      loss; without --entry, the train step of the artifact
                      (by its manifest role; several: name one with --entry)
  --pipeline          train a pipelined program (par-pipeline-split and
                      par-pipeline-schedule): each rank runs its stored
                      actions; data from --data, from --input argK=FILE.npy
                      (the step's whole argument, m micro-batches: the same
                      batch every step) or from the generator
  --nonfinite error|skip|off  with --steps: after each step the loss and the
                      new parameters and state are checked for NaN/Inf on
                      every rank; error (default): name the step and the
                      first non-finite tensor and exit 1; skip: discard the
                      step's update and go on (counted); off: no check.
                      Programs with dynamic loss scaling skip such steps
                      themselves and are not checked
  --checkpoint DIR    with --steps: save the train state (parameters,
                      optimizer, loss-scale and compression state, step,
                      seed) to DIR/step-NNNNNNNN, every rank its shards,
                      atomically (docs/Checkpoints.md): after the last step
                      and, with --save-every N, after every N-th; --keep K
                      keeps the newest K
  --resume DIR        continue from DIR's newest complete checkpoint (saved
                      on any mesh, pipelined or not): --steps N is the total;
                      without --steps: export it with --save-weights

Results and reports:
  --output DIR        the gathered results as DIR/resultK.npy
  --save-weights FILE.safetensors  after the run (after training: the
                      trained ones) the named inputs, global, under their
                      names and aliases (the segments of a fused parameter
                      as the fused tensor); written atomically
  --verify            compare with the unsharded program on 1 rank from the
                      same inputs: the results; after --steps N the loss of
                      every step, and the last step's parameters and
                      optimizer state against the reference's step from the
                      same state, elementwise (with --pipeline: the
                      unpipelined step's)
  --rtol X            verify tolerance (relative to the reference's largest
                      magnitude); default 1e-5 for f32, 1e-12 for f64, 1e-3
                      for f16, 1e-2 for bf16 and mixed precision; a cuda
                      program: 1e-4 for f32, 1e-10 for f64, 1e-2 for f16,
                      2e-2 for bf16 (GPU reductions sum in another order)
  --state-rtol X      verify tolerance of the trained parameters and
                      optimizer state (default: --rtol's)
  --loss-csv FILE     with --steps: step,loss,seconds per step
  --loss-plot FILE.svg  with --steps: plot the loss per step
  --alloc-stats       with --steps: rank 0's buffer-pool counts per step
                      after the first (system allocations, pool hits)
  --profile           with --steps: rank 0's time per step by kernel (name,
                      calls, ms, share of the step, GFLOP/s) over the steps
                      after the first, as torch.profiler's table (CPU
                      programs); --profile-top N rows (default 15);
                      --profile-rank R another rank's (a pipeline stage's)
  --error-norm        with --steps: the L2 norm of gradient compression's
                      error-feedback buffers after training
  --trace FILE.json   with --pipeline: a Chrome trace of every rank's actions
                      in the last step (open in Perfetto)
  --sample N          after training, sample N characters with the logits
                      entry (--sample-entry NAME, default the step's logits
                      role), from --prompt TEXT (default a newline) at
                      --temperature T (default 0.8; 0: greedy)

A rank that dies ends the job: par-run names it and its signal or exit code.
After --steps N, rank 0 prints the bytes per step and rank by kernel and,
with gradient compression, its bytes against the fp32 ring all-reduce; and
the memory of the rank with the largest measured peak against the
compiler's memory plan ("par-run: memory (rank R): predicted P MiB,
measured peak M MiB"; M is the runtime allocator's count, followed by the
kernel's resident set and what the buffer pool holds).
Testing hooks: PAR_RUN_PID_DIR=DIR (each rank writes DIR/rank-R.pid),
PAR_RUN_INJECT_KILL=R:S and PAR_RUN_INJECT_HANG=R:S (rank R kills itself or
hangs before step S), PAR_RUN_INJECT_CRASH=R.
)";

/// A positive count; `what` completes "needs a positive ...".
int64_t positive(const std::string &opt, const std::string &v,
                 const char *what) {
  char *end = nullptr;
  long long n = strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end || n <= 0)
    fatal(opt + " needs a positive " + what + ", got '" + v + "'");
  return n;
}

/// A number >= 0 ("--rtol needs a non-negative number, got ...").
double nonNegative(const std::string &opt, const std::string &v,
                   const char *what) {
  char *end = nullptr;
  double x = strtod(v.c_str(), &end);
  if (v.empty() || *end || !(x >= 0))
    fatal(opt + " needs " + what + ", got '" + v + "'");
  return x;
}

int64_t argIndex(const std::string &opt, const std::string &v) {
  char *end = nullptr;
  long long k = v.rfind("arg", 0) == 0 ? strtoll(v.c_str() + 3, &end, 10) : -1;
  if (k < 0 || v.size() == 3 || *end)
    fatal(opt + " needs argK, got '" + v + "'");
  return k;
}

/// Options that need another one, or exclude one.
void checkTrainingOptions(const RunOptions &r) {
  if (r.train.steps > 0 && r.repeat > 1)
    fatal("--steps and --repeat cannot be combined");
  if (!r.train.lossCsv.empty() && r.train.steps == 0)
    fatal("--loss-csv needs --steps");
  if (!r.train.lossPlot.empty() && r.train.steps == 0)
    fatal("--loss-plot needs --steps");
  if (r.train.allocStats && r.train.steps == 0)
    fatal("--alloc-stats needs --steps");
  if (r.profile && r.train.steps == 0)
    fatal("--profile needs --steps (it times the steps after the first)");
  if (r.profileRank > 0 && !r.profile)
    fatal("--profile-rank needs --profile");
  if (r.profile && r.ranks > 0 && r.profileRank >= r.ranks)
    fatal("--profile-rank " + std::to_string(r.profileRank) +
          " is not a rank of the " + std::to_string(r.ranks) + "-rank job");
  if (r.profile && r.backend == "cuda")
    fatal("--profile times CPU programs; on a GPU use Nsight Systems "
          "(nsys profile par-run ...)");
  if (r.errorNorm && r.train.steps == 0)
    fatal("--error-norm needs --steps (it reports the error-feedback "
          "buffers after training)");
  if (!r.checkpoint.dir.empty() && r.train.steps == 0)
    fatal("--checkpoint needs --steps (it saves the train state)");
  if ((r.checkpoint.every > 0 || r.checkpoint.keep > 0) &&
      r.checkpoint.dir.empty())
    fatal("--save-every and --keep need --checkpoint DIR");
  if (r.sample.count > 0 && (r.train.steps == 0 || r.data.empty()))
    fatal("--sample needs --steps and --data (it samples from the trained "
          "model with the data's character tokenizer)");
}

void checkPipelineOptions(const RunOptions &r) {
  if (r.pipeline && ((r.train.steps == 0 && r.resume.empty()) ||
                     !r.entry.empty()))
    fatal("--pipeline trains: it needs --steps, and takes no --entry");
  if (r.pipeline && !r.inputs.empty() && r.verify)
    fatal("--pipeline --verify checks against generated or --data batches; "
          "it does not take --input");
  if (r.pipeline && !r.inputs.empty() && !r.data.empty())
    fatal("--pipeline takes its data from --data or from --input (a fixed "
          "batch), not both");
  if (!r.trace.empty() && !r.pipeline)
    fatal("--trace needs --pipeline");
}

void checkStateOptions(const RunOptions &r) {
  if (!r.saveWeights.empty() && !r.loadWeights.empty() &&
      r.saveWeights == r.loadWeights)
    fatal("--save-weights would overwrite the --load-weights file '" +
          r.loadWeights + "' while it is read; give another path");
  if (!r.resume.empty() && r.train.steps == 0 && r.saveWeights.empty())
    fatal("--resume without --steps exports the checkpoint's weights: give "
          "--save-weights FILE.safetensors (or --steps N to train on)");
  if (!r.resume.empty() && !r.loadWeights.empty())
    fatal("--resume takes the parameters from the checkpoint; drop "
          "--load-weights");
  if (!r.resume.empty() && r.verify)
    fatal("--verify checks against the reference from the initial values; "
          "it does not combine with --resume");
  if (!r.resume.empty() && (r.repeat > 1 || !r.inputs.empty()))
    fatal("--resume continues training: it takes no --repeat or --input");
}

void validate(const RunOptions &r) {
  if (r.artifact.empty()) {
    printRunUsage(stderr);
    fatal("no artifact given");
  }
  if (r.ranks < 0)
    fatal("-n N is required");
  if (!r.hostfile.empty() && !r.hosts.empty())
    fatal("--hostfile and -H both list the hosts; give one");
  checkTrainingOptions(r);
  checkPipelineOptions(r);
  checkStateOptions(r);
}

/// The options about the job and its ranks; false if `a` is not one.
bool parseJobOption(const std::string &a, const std::function<std::string()> &next,
                    RunOptions &r) {
  if (a == "-n" || a == "--ranks") {
    r.ranks = positive("-n", next(), "number of ranks");
  } else if (a == "--backend") {
    r.backend = next();
    if (r.backend != "cpu" && r.backend != "cuda")
      fatal("unknown backend '" + r.backend + "' (expected cpu or cuda)");
  } else if (a == "--hostfile") {
    r.hostfile = next();
  } else if (a == "-H" || a == "--host") {
    r.hosts = next();
    if (r.hosts.empty())
      fatal(a + " needs a host list (host:slots,...)");
  } else if (a == "--pipeline") {
    r.pipeline = true;
  } else if (a == "--memory-limit") {
    std::string v = next();
    r.memoryLimit = parseByteSize(v);
    if (r.memoryLimit <= 0)
      fatal("--memory-limit needs a size per rank (bytes, or a number with "
            "K, M, G or T, e.g. 2GiB), got '" + v + "'");
  } else if (a == "--threads") {
    std::string v = next();
    char *end = nullptr;
    long t = strtol(v.c_str(), &end, 10);
    if (v.empty() || *end || t < 1 || t > 1024)
      fatal("--threads takes a number of threads from 1 to 1024, not '" + v +
            "'");
    r.threads = t;
  } else if (a == "--collective-timeout") {
    r.collectiveTimeout = next();
    nonNegative(a, r.collectiveTimeout, "a number of seconds >= 0");
  } else {
    return false;
  }
  return true;
}

/// The options about the program's inputs; false if `a` is not one.
bool parseInputOption(const std::string &a,
                      const std::function<std::string()> &next,
                      RunOptions &r) {
  if (a == "--input") {
    std::string v = next();
    size_t eq = v.find('=');
    if (eq == std::string::npos)
      fatal("--input needs NAME=FILE.npy, got '" + v + "'");
    r.inputs[v.substr(0, eq)] = v.substr(eq + 1);
  } else if (a == "--seed") {
    r.seed = r.sample.seed = strtoull(next().c_str(), nullptr, 10);
    r.seedGiven = true;
  } else if (a == "--entry") {
    r.entry = next();
  } else if (a == "--data") {
    r.data = next();
  } else if (a == "--tokens") {
    r.tokensArg = argIndex(a, next());
    r.tokensGiven = true;
  } else if (a == "--targets") {
    r.targetsArg = argIndex(a, next());
    r.targetsGiven = true;
  } else if (a == "--load-weights") {
    r.loadWeights = next();
  } else {
    return false;
  }
  return true;
}

/// The options about training and its state; false if `a` is not one.
bool parseTrainOption(const std::string &a,
                      const std::function<std::string()> &next,
                      RunOptions &r) {
  if (a == "--repeat") {
    r.repeat = positive(a, next(), "count");
  } else if (a == "--steps") {
    r.train.steps = positive(a, next(), "count");
  } else if (a == "--checkpoint") {
    r.checkpoint.dir = next();
  } else if (a == "--save-every") {
    r.checkpoint.every = positive(a, next(), "number of steps");
  } else if (a == "--keep") {
    r.checkpoint.keep = positive(a, next(), "count");
  } else if (a == "--resume") {
    r.resume = next();
  } else if (a == "--nonfinite") {
    std::string v = next();
    if (std::optional<NonFiniteMode> m = parseNonFiniteMode(v))
      r.nonFinite = *m;
    else
      fatal("--nonfinite needs error, skip or off, got '" + v + "'");
  } else {
    return false;
  }
  return true;
}

/// The options about results and reports; false if `a` is not one.
bool parseReportOption(const std::string &a,
                       const std::function<std::string()> &next,
                       RunOptions &r) {
  if (a == "--output") {
    r.outputDir = next();
  } else if (a == "--save-weights") {
    r.saveWeights = next();
  } else if (a == "--verify") {
    r.verify = true;
  } else if (a == "--rtol") {
    r.rtol = nonNegative(a, next(), "a non-negative number");
  } else if (a == "--state-rtol") {
    r.stateRtol = nonNegative(a, next(), "a non-negative number");
  } else if (a == "--loss-csv") {
    r.train.lossCsv = next();
  } else if (a == "--loss-plot") {
    r.train.lossPlot = next();
  } else if (a == "--alloc-stats") {
    r.train.allocStats = true;
  } else if (a == "--profile") {
    r.profile = true;
  } else if (a == "--profile-top") {
    r.profileRows = positive(a, next(), "number of rows");
  } else if (a == "--profile-rank") {
    std::string v = next();
    char *end = nullptr;
    long long k = strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end || k < 0)
      fatal("--profile-rank needs a rank (0, 1, ...), got '" + v + "'");
    r.profileRank = k;
  } else if (a == "--error-norm") {
    r.errorNorm = true;
  } else if (a == "--trace") {
    r.trace = next();
  } else if (a == "--sample") {
    r.sample.count = positive(a, next(), "count");
  } else if (a == "--prompt") {
    r.sample.prompt = next();
    if (r.sample.prompt.empty())
      fatal("--prompt needs at least one character");
  } else if (a == "--temperature") {
    r.sample.temperature = nonNegative(a, next(), "a number >= 0");
  } else if (a == "--sample-entry") {
    r.sampleEntry = next();
  } else {
    return false;
  }
  return true;
}

} // namespace

void printRunUsage(FILE *to) { fputs(kUsage, to); }

RunOptions parseRunOptions(int argc, char **argv) {
  RunOptions r;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::function<std::string()> next = [&]() -> std::string {
      if (i + 1 >= argc)
        fatal("option " + a + " needs a value");
      return argv[++i];
    };
    if (parseJobOption(a, next, r) || parseInputOption(a, next, r) ||
        parseTrainOption(a, next, r) || parseReportOption(a, next, r))
      continue;
    if (a == "-h" || a == "--help") {
      printRunUsage(stdout);
      exit(0);
    }
    if (!a.empty() && a[0] == '-')
      fatal("unknown option '" + a + "' (--help lists the options)");
    if (!r.artifact.empty())
      fatal("more than one artifact given ('" + r.artifact + "', '" + a +
            "')");
    r.artifact = a;
  }
  validate(r);
  return r;
}

namespace {

/// The ranks that share this host: inside a job someone else started, as
/// its launcher says; otherwise the ranks par-run starts here.
int64_t localRanks(const RunOptions &o) {
  int64_t local = o.hostfile.empty() && o.hosts.empty() ? o.ranks : 1;
  if (const char *n = getenv("OMPI_COMM_WORLD_LOCAL_SIZE"))
    local = atoll(n);
  return std::max<int64_t>(local, 1);
}

} // namespace

int64_t threadsPerRank(const RunOptions &o) {
  if (o.threads > 0)
    return o.threads;
  if (const char *env = getenv("OMP_NUM_THREADS"); env && atoll(env) > 0)
    return atoll(env);
  return std::max<int64_t>(1, availableCores() / localRanks(o));
}

void exportRunEnvironment(const RunOptions &o) {
  // Every rank's threads: T OpenMP threads, which run the parallel loops
  // and the GEMMs (split over them; OpenBLAS itself keeps one thread, so
  // that two pools do not compete). --threads T, or the host's cores
  // shared among its ranks (PyTorch's default takes every core);
  // OMP_NUM_THREADS overrides the default.
  int64_t threads = threadsPerRank(o);
  setenv("OMP_NUM_THREADS", std::to_string(threads).c_str(), o.threads > 0);
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  // The OpenMP runtime is loaded in this process already (a one-rank run
  // goes on here): its thread count is set directly.
  par_rt_set_threads(atoi(getenv("OMP_NUM_THREADS")));
  // Idle OpenMP threads: with a core each they spin a while (libomp's
  // default, 200 ms) so that the next parallel loop starts at once; when
  // the ranks' threads share cores they sleep at once instead of spinning
  // against BLAS and the other ranks.
  if (!threadsFitCores(localRanks(o), threads))
    setenv("KMP_BLOCKTIME", "0", 0);
  // The runtime's watchdog reads it (Watchdog.h).
  if (!o.collectiveTimeout.empty())
    setenv("PAR_COLLECTIVE_TIMEOUT", o.collectiveTimeout.c_str(), 1);
}

} // namespace par::tooling

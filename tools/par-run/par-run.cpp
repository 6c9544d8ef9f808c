//===- par-run.cpp - Runs a compiled par program on N ranks ---------------===//
//
// par-run -n N ARTIFACT [--backend cpu|cuda] [--input NAME=FILE.npy ...]
//         [--seed S] [--output DIR] [--verify] [--entry NAME]
//         [--load-weights F.safetensors] [--save-weights F.safetensors]
//
// Outside an MPI job, par-run checks N against the artifact's mesh and
// re-launches itself through `mpirun -n N` (a single rank runs in this
// process; inside an mpirun or srun job started by the user it runs
// directly). Each rank then runs the program through the session API
// (par_session.h) with the tooling library (par/Tooling): the inputs'
// local blocks from the counter-based generator or given .npy files, the
// entry point once, K times or as a train step, per-rank time and bytes,
// the gathered outputs as .npy, and with --verify the unsharded reference
// on the same global inputs; --load-weights and --save-weights take the
// named parameters (the frontend's par.name) from and to a .safetensors
// file (Weights.h). --pipeline runs a pipelined train step. After
// training, the bytes per step by kernel and gradient compression's savings
// (--error-norm: the error-feedback buffers' norm).
//
// --backend cuda runs a program compiled with par-compile --target cuda
// (the manifest's "target" is "cuda:<chip>"): the tooling keeps its state
// in device buffers (the session's buffer API, which CPU programs use the
// same way) and --verify compares it with the CPU reference at the GPU
// defaults of Compare.h's toleranceFor (f32 1e-4: GPU reductions
// reassociate; bf16 mixed 2e-2, f16 1e-2). An artifact run on the other
// backend than it was compiled for stops with a message saying which.
//
//===----------------------------------------------------------------------===//

#include "par/Runtime/par_session.h"
#include "par/Tooling/Diagnostics.h"
#include "par/Tooling/Function.h"
#include "par/Tooling/Launcher.h"
#include "par/Tooling/PipelineExecutor.h"
#include "par/Tooling/RunModule.h"
#include "par/Tooling/TrainState.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

using namespace par::tooling;

namespace {

/// --threads was given (its environment is set as it is parsed).
bool threadsGiven = false;

struct Options {
  int64_t ranks = -1;
  std::string backend = "cpu";
  bool pipeline = false; // --pipeline: run par-pipeline-schedule's programs
  RunOptions run;
};

void usage() {
  fprintf(stderr,
          "usage: par-run -n N ARTIFACT_DIR [--backend cpu|cuda] "
          "[--input NAME=FILE.npy ...] [--seed S] [--output DIR] [--verify] "
          "[--entry NAME] [--repeat K] [--steps N [--loss-csv FILE] "
          "[--error-norm]] [--load-weights F.safetensors] "
          "[--save-weights F.safetensors]\n"
          "  --input NAME=FILE.npy  NAME is argK or the input's PyTorch name "
          "(par.name\n             or an alias)\n"
          "  --input/--output .npy files have the tensor's dtype: numpy's "
          "own for\n             f64, f32, f16 (float16), i64, i32, i8, "
          "i1 (bool); bf16 is '<u2',\n             the upper 16 bits of "
          "the f32 pattern (numpy has no bfloat16)\n"
          "  --data FILE character-level corpus: each run/step fills the token "
          "and\n             target arguments (--tokens argK, --targets argJ; "
          "default the\n             inputs of role tokens/targets (par.data), "
          "else arg0, arg1;\n             i64 [batch, seq]) with random "
          "windows of FILE. Without --data,\n             tokens/targets "
          "inputs get generated ids in [0, vocab)\n"
          "  --load-weights FILE.safetensors  before the run, every input with "
          "a name\n             (par.name) takes the file's tensor of that "
          "name or one of its\n             aliases (global shape and dtype "
          "must match; other tensors in\n             the file are ignored "
          "and counted)\n"
          "  --save-weights FILE.safetensors  after the run (after training, "
          "also with\n             --pipeline; without --steps: the inputs as "
          "given) the named inputs,\n             global, under their names "
          "and aliases (torch: load_state_dict(\n             "
          "safetensors.torch.load_file(FILE))); written atomically\n"
          "  --rtol X    verify tolerance (relative to the reference's largest "
          "magnitude);\n             default 1e-5 for f32, 1e-12 for f64, 1e-3 for f16, 1e-2 for\n             bf16 (and for f32 values of a mixed-precision program)\n"
          "             A cuda program (--backend cuda) is verified against the "
          "CPU\n             reference with wider defaults: 1e-4 for f32 (GPU "
          "reductions\n             sum in another order), 1e-10 for f64, 1e-2 "
          "for f16 and 2e-2 for\n             bf16 values or mixed precision (a "
          "reordered sum moves a 16-bit\n             value by an ulp, 2^-11 "
          "or 2^-8, and the steps compound it)\n"
          "  --backend cuda  run a program compiled with par-compile --target "
          "cuda\n             (parameters and state stay in GPU memory; the "
          "default cpu\n             runs CPU programs)\n"
          "  --checkpoint DIR  with --steps: save the train state (parameters, "
          "optimizer,\n             loss-scale and compression state, step, "
          "seed) to DIR/step-NNNNNNNN,\n             every rank its shards, "
          "atomically (docs/Checkpoints.md): after the\n             last step "
          "and, with --save-every N, after every N-th; --keep K\n"
          "             keeps the newest K\n"
          "  --resume DIR  continue from DIR's newest complete checkpoint "
          "(saved on any\n             mesh, pipelined or not): --steps N is "
          "the total, a run resumed\n             at step k runs k+1..N with "
          "the checkpoint's seed and batches;\n             without --steps: "
          "export it with --save-weights\n"
          "  --steps N   train: run a train step (par-optimizer) N times, "
          "feeding\n             new parameters and state back, printing the "
          "loss; without\n             --entry, the train step of the first "
          "function (<f>_step)\n"
          "  --nonfinite error|skip|off  with --steps: after each step the "
          "loss and the\n             new parameters and state are checked "
          "for NaN/Inf on every\n             rank; error (default): name the "
          "step and the first non-finite\n             tensor and exit 1; "
          "skip: discard the step's update and go on\n             (the "
          "skipped steps are counted); off: no check. Programs with\n"
          "             dynamic loss scaling skip such steps themselves and "
          "are not\n             checked\n"
          "  --repeat K  run the program K times (after one warm-up run when "
          "K > 1)\n             and report the best and median time\n"
          "  --loss-plot FILE.svg  with --steps: plot the loss per step\n"
          "  --threads T        threads per rank: OpenMP's parallel loops (default 1,\n"
          "                     or OMP_NUM_THREADS) and OpenBLAS (unless\n"
          "                     OPENBLAS_NUM_THREADS is set)\n"
          "  --alloc-stats      with --steps: rank 0's buffer-pool counts per step\n"
          "                     after the first (system allocations, pool hits)\n"
          "  --sample N  after training, sample N characters from the model "
          "with\n             the logits entry (--sample-entry NAME, default "
          "the step's\n             logits role: par.logits on its forward), from "
          "--prompt TEXT (default\n             a newline) at --temperature "
          "T (default 0.8; 0: greedy)\n"
          "  --pipeline  train a pipelined program (par-pipeline-split and\n"
          "             par-pipeline-schedule): each rank runs its stored "
          "actions;\n             with --verify the loss trajectory is "
          "checked against the\n             unpipelined train step on 1 "
          "rank; data from --data, from --input\n             argK=FILE.npy "
          "(the step's whole argument, m micro-batches: the\n             same "
          "batch every step) or from the generator\n"
          "  --trace FILE.json  with --pipeline: a Chrome trace of every "
          "rank's\n             actions (open in Perfetto)\n"
          "  --error-norm  with --steps: after training print the L2 norm of "
          "the\n             error-feedback buffers of gradient compression "
          "(par-compress-\n             gradients; all ranks' rows, the "
          "stage updates' with --pipeline)\n"
          "  --collective-timeout SECONDS  a rank that waits longer in one "
          "collective\n             (or transfer) ends the job naming it and "
          "the ranks that have not\n             reached it (default 600; 0: "
          "never; PAR_COLLECTIVE_TIMEOUT)\n"
          "A rank that dies ends the job: par-run names it and its signal or "
          "exit code.\nTesting hooks: PAR_RUN_PID_DIR=DIR (each rank writes "
          "DIR/rank-R.pid),\nPAR_RUN_INJECT_KILL=R:S and PAR_RUN_INJECT_HANG="
          "R:S (rank R kills itself or\nhangs before step S)\n"
          "After --steps N, rank 0 prints the bytes per step and rank the "
          "runtime\nmeasured on the rank that sent the most, by kernel, and, "
          "when the step or\nthe stage updates compress their gradients, "
          "the bytes of the compressed\nexchanges against the fp32 ring "
          "all-reduce they replace:\n"
          "  par-run: bytes per step and rank: B (KERNEL BYTES, ...) on rank "
          "R, the most of N ranks\n"
          "  par-run: compression METHOD: exchanges C bytes per step and rank "
          "(formula), fp32\n    ring all-reduce of the same gradients U: "
          "U/Cx fewer; this step measured B,\n    without compression it "
          "would send B-C+U (ratio) on rank R\n"
          "--verify compares a step with error-feedback state (which the "
          "reference lacks)\non the results both have.\n");
}

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
  if (v.rfind("arg", 0) != 0)
    fatal(opt + " needs argK, got '" + v + "'");
  return strtoll(v.c_str() + 3, nullptr, 10);
}

void checkCombinations(const Options &o) {
  const RunOptions &r = o.run;
  if (r.artifact.empty()) {
    usage();
    fatal("no artifact given");
  }
  if (o.ranks < 0)
    fatal("-n N is required");
  if (r.train.steps > 0 && r.repeat > 1)
    fatal("--steps and --repeat cannot be combined");
  if (!r.train.lossCsv.empty() && r.train.steps == 0)
    fatal("--loss-csv needs --steps");
  if (!r.train.lossPlot.empty() && r.train.steps == 0)
    fatal("--loss-plot needs --steps");
  if (r.train.allocStats && r.train.steps == 0)
    fatal("--alloc-stats needs --steps");
  // Without --threads a rank's parallel loops run on one thread (libomp
  // would take every core in every rank), unless the environment says.
  if (!threadsGiven)
    setenv("OMP_NUM_THREADS", "1", 0);
  setenv("KMP_BLOCKTIME", "0", 0);
  if (o.pipeline && ((r.train.steps == 0 && r.resume.empty()) ||
                     !r.entry.empty()))
    fatal("--pipeline trains: it needs --steps, and takes no --entry");
  if (o.pipeline && !r.inputs.empty() && r.verify)
    fatal("--pipeline --verify checks against generated or --data batches; "
          "it does not take --input");
  if (o.pipeline && !r.inputs.empty() && !r.data.empty())
    fatal("--pipeline takes its data from --data or from --input (a fixed "
          "batch), not both");
  if (!r.saveWeights.empty() && !r.loadWeights.empty() &&
      r.saveWeights == r.loadWeights)
    fatal("--save-weights would overwrite the --load-weights file '" +
          r.loadWeights + "' while it is read; give another path");
  if (!r.trace.empty() && !o.pipeline)
    fatal("--trace needs --pipeline");
  if (r.errorNorm && r.train.steps == 0)
    fatal("--error-norm needs --steps (it reports the error-feedback "
          "buffers after training)");
  if (!r.checkpoint.dir.empty() && r.train.steps == 0)
    fatal("--checkpoint needs --steps (it saves the train state)");
  if ((r.checkpoint.every > 0 || r.checkpoint.keep > 0) &&
      r.checkpoint.dir.empty())
    fatal("--save-every and --keep need --checkpoint DIR");
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
  if (r.sample.count > 0 && (r.train.steps == 0 || r.data.empty()))
    fatal("--sample needs --steps and --data (it samples from the trained "
          "model with the data's character tokenizer)");
}

Options parseArgs(int argc, char **argv) {
  Options o;
  RunOptions &r = o.run;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc)
        fatal("option " + a + " needs a value");
      return argv[++i];
    };
    if (a == "-n" || a == "--ranks") {
      o.ranks = positive("-n", next(), "number of ranks");
    } else if (a == "--backend") {
      o.backend = next();
      if (o.backend != "cpu" && o.backend != "cuda")
        fatal("unknown backend '" + o.backend + "' (expected cpu or cuda)");
    } else if (a == "--input") {
      std::string v = next();
      size_t eq = v.find('=');
      if (eq == std::string::npos)
        fatal("--input needs NAME=FILE.npy, got '" + v + "'");
      r.inputs[v.substr(0, eq)] = v.substr(eq + 1);
    } else if (a == "--seed") {
      r.seed = r.sample.seed = strtoull(next().c_str(), nullptr, 10);
      r.seedGiven = true;
    } else if (a == "--checkpoint") {
      r.checkpoint.dir = next();
    } else if (a == "--save-every") {
      r.checkpoint.every = positive(a, next(), "number of steps");
    } else if (a == "--keep") {
      r.checkpoint.keep = positive(a, next(), "count");
    } else if (a == "--resume") {
      r.resume = next();
    } else if (a == "--output") {
      r.outputDir = next();
    } else if (a == "--entry") {
      r.entry = next();
    } else if (a == "--repeat") {
      r.repeat = positive(a, next(), "count");
    } else if (a == "--steps") {
      r.train.steps = positive(a, next(), "count");
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
    } else if (a == "--save-weights") {
      r.saveWeights = next();
    } else if (a == "--rtol") {
      r.rtol = nonNegative(a, next(), "a non-negative number");
    } else if (a == "--loss-csv") {
      r.train.lossCsv = next();
    } else if (a == "--alloc-stats") {
      r.train.allocStats = true;
    } else if (a == "--loss-plot") {
      r.train.lossPlot = next();
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
    } else if (a == "--pipeline") {
      o.pipeline = true;
    } else if (a == "--trace") {
      r.trace = next();
    } else if (a == "--verify") {
      r.verify = true;
    } else if (a == "--error-norm") {
      r.errorNorm = true;
    } else if (a == "--threads") {
      // Every rank's threads: OpenMP's parallel loops and OpenBLAS
      // (mpirun forwards the environment); idle OpenMP threads sleep at
      // once instead of spinning against BLAS and the other ranks.
      std::string v = next();
      char *end = nullptr;
      long t = strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || t < 1 || t > 1024)
        fatal("--threads takes a number of threads from 1 to 1024, not '" +
              v + "'");
      setenv("OMP_NUM_THREADS", v.c_str(), 1);
      setenv("OPENBLAS_NUM_THREADS", v.c_str(), 0); // unless set
      threadsGiven = true;
    } else if (a == "--collective-timeout") {
      // The runtime's watchdog reads it (Watchdog.h); mpirun forwards it.
      std::string v = next();
      nonNegative(a, v, "a number of seconds >= 0");
      setenv("PAR_COLLECTIVE_TIMEOUT", v.c_str(), 1);
    } else if (a == "--nonfinite") {
      std::string v = next();
      if (std::optional<NonFiniteMode> m = parseNonFiniteMode(v))
        r.nonFinite = *m;
      else
        fatal("--nonfinite needs error, skip or off, got '" + v + "'");
    } else if (a == "-h" || a == "--help") {
      usage();
      exit(0);
    } else if (!a.empty() && a[0] == '-') {
      usage();
      fatal("unknown option '" + a + "'");
    } else if (r.artifact.empty()) {
      r.artifact = a;
    } else {
      fatal("more than one artifact given ('" + r.artifact + "', '" + a +
            "')");
    }
  }
  checkCombinations(o);
  return o;
}

/// Starts the runtime on this rank and declares `f`'s mesh.
par_rt_context_t *startRuntime(const Options &o, const Function &f,
                               const std::string &target, int *argc,
                               char ***argv) {
  par_rt_options_t ropts;
  par_rt_options_initialize(&ropts);
  ropts.backend = o.backend == "cuda" ? PAR_BACKEND_CUDA : PAR_BACKEND_CPU;
  par_rt_context_t *ctx = nullptr;
  checkRuntime(par_rt_context_create(&ropts, argc, argv, &ctx), ctx,
               "cannot start the " + o.backend + " backend");
  if (ropts.backend == PAR_BACKEND_CUDA && target == "cpu")
    fatal("the artifact was compiled for the CPU; compile with par-compile "
          "--target cuda");
  int64_t world = par_rt_context_world_size(ctx);
  if (world != o.ranks)
    fatal("started with " + std::to_string(world) + " ranks but -n " +
          std::to_string(o.ranks));
  checkRuntime(
      par_rt_context_set_mesh(ctx, f.axisSizes.size(), f.axisSizes.data()),
      ctx, "mesh of '" + f.name + "'");
  return ctx;
}

} // namespace

int main(int argc, char **argv) {
  setToolName("par-run");
  superviseLaunchedRank(); // in a rank launchJob started
  Options o = parseArgs(argc, argv);
  struct stat st;
  if (stat(o.run.artifact.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    fatal("cannot open artifact directory '" + o.run.artifact + "'");
  // The manifest alone (the launcher needs the mesh, not the code).
  Session manifest(o.run.artifact, PAR_PROGRAM_SHARDED, nullptr,
                   /*loadCode=*/false);
  // An export from a checkpoint (--resume without --steps) runs the train
  // step's layout: the first function's step unless --entry says.
  if (!o.run.resume.empty() && o.run.train.steps == 0 && o.run.entry.empty() &&
      !o.pipeline)
    o.run.entry = manifest.lookup("").step;
  // Training without --entry: the train step the manifest links to the
  // first function (par-compile's `<f>_step`), unless that one is a step.
  if (o.run.train.steps > 0 && o.run.entry.empty() && !o.pipeline) {
    Function first = manifest.lookup("");
    if (first.feedback.empty() && !first.step.empty())
      o.run.entry = first.step;
  }
  Function f = manifest.lookup(o.run.entry);
  // --resume: the checkpoint's step and seed (read here first, so that a
  // missing or bad checkpoint fails before any rank starts).
  if (!o.run.resume.empty())
    o.run.resumedStep = adoptCheckpoint(o.run);
  // A GPU program needs the CUDA backend (checked before any rank starts);
  // a CPU program on --backend cuda is refused once the backend is up
  // (without a GPU, starting it fails first, with its own message).
  std::string target = manifest.target();
  if (o.backend == "cpu" && target != "cpu")
    fatal("'" + o.run.artifact + "' was compiled for " + target +
          "; run it with --backend cuda");
  if (!insideMPIJob()) {
    if (o.ranks != f.devices())
      fatal("-n " + std::to_string(o.ranks) + " does not match the mesh of '" +
            f.name + "', which has " + std::to_string(f.devices()) +
            " devices");
    for (auto &[name, path] : o.run.inputs)
      if (access(path.c_str(), R_OK) != 0)
        fatal("cannot open input '" + name + "' file '" + path + "'");
    if (!o.run.loadWeights.empty() &&
        access(o.run.loadWeights.c_str(), R_OK) != 0)
      fatal("--load-weights: cannot open '" + o.run.loadWeights + "'");
    if (o.ranks > 1)
      return launchJob(o.ranks, argc, argv);
    usePrivateSessionDir(); // one rank: an MPI singleton in this process
  }
  // --data's token and target arguments: the inputs of those roles unless
  // --tokens/--targets say (a pipelined program's split function numbers
  // its arguments as the train step does).
  par_pipeline_info_t pipe = manifest.pipeline();
  resolveDataArgs(o.pipeline && pipe.present && pipe.step
                      ? manifest.lookup(pipe.step)
                      : f,
                  o.run);
  par_rt_context_t *ctx = startRuntime(o, f, target, &argc, &argv);
  int status = o.pipeline ? runPipeline(ctx, o.run) : runModule(ctx, o.run);
  fflush(stdout);
  par_rt_barrier(ctx);
  par_rt_context_destroy(ctx);
  return status;
}

//===- RunPlan.cpp - A par-run job, resolved against its artifact ---------===//

#include "par/Tooling/RunPlan.h"

#include "par/Manifest/Schema.h"
#include "par/Tooling/Diagnostics.h"
#include "par/Tooling/Function.h"
#include "par/Tooling/Launcher.h"
#include "par/Tooling/RunModule.h"
#include "par/Tooling/TrainState.h"

#include <cstdio>
#include <cstdlib>
#include <sys/stat.h>
#include <unistd.h>

namespace par::tooling {

namespace {

/// A train step: its manifest has feedback pairs (par-optimizer's), and
/// it is not a pipeline stage's update.
bool isTrainStep(const Function &f) {
  return !f.feedback.empty() && f.stage < 0;
}

/// With --steps and no --entry: the train step. The first function, if it
/// is one; else the one it links to (par-compile's <f>_step); else the
/// artifact's only train step. Several and none linked: fatal, naming
/// them.
std::string trainEntry(const Session &manifest) {
  Function first = manifest.lookup("");
  if (isTrainStep(first))
    return first.name;
  if (!first.step.empty())
    return first.step;
  std::vector<std::string> steps;
  for (const std::string &name : manifest.functionNames())
    if (isTrainStep(manifest.lookup(name)))
      steps.push_back(name);
  if (steps.size() == 1)
    return steps[0];
  if (steps.empty())
    return first.name; // the train driver says why it is not a step
  std::string list;
  for (const std::string &s : steps)
    list += (list.empty() ? "'" : ", '") + s + "'";
  fatal("--steps: the artifact has " + std::to_string(steps.size()) +
        " train steps (" + list + "); choose one with --entry NAME");
}

/// The function a run calls.
std::string chooseEntry(const Session &manifest, const RunOptions &o) {
  if (!o.entry.empty())
    return manifest.lookup(o.entry).name;
  // An export from a checkpoint (--resume without --steps) runs the train
  // step's layout: the first function's step.
  if (!o.resume.empty() && o.train.steps == 0 && !o.pipeline) {
    std::string step = manifest.lookup("").step;
    if (!step.empty())
      return step;
  }
  if (o.train.steps > 0 && !o.pipeline)
    return trainEntry(manifest);
  return manifest.lookup("").name;
}

/// --data's token and target arguments: the inputs of those roles unless
/// --tokens/--targets say (a pipelined program's split function numbers
/// its arguments as the train step does).
void resolveDataArgs(const Session &manifest, RunPlan &p) {
  namespace key = ::par::manifest::key;
  const RunOptions &o = p.options;
  p.tokensArg = o.tokensArg;
  p.targetsArg = o.targetsArg;
  par_pipeline_info_t pipe = manifest.pipeline();
  Function f = manifest.lookup(o.pipeline && pipe.present && pipe.step
                                   ? std::string(pipe.step)
                                   : p.entry);
  if (!o.tokensGiven)
    if (std::optional<size_t> i = f.inputWithRole(key::kRoleTokens))
      p.tokensArg = *i;
  if (!o.targetsGiven)
    if (std::optional<size_t> i = f.inputWithRole(key::kRoleTargets))
      p.targetsArg = *i;
}

/// Outside a job: the plan fits the ranks asked for, and the files the
/// ranks will read are there (before any rank starts).
void checkBeforeLaunch(const RunPlan &plan) {
  const RunOptions &o = plan.options;
  if (o.ranks != plan.devices)
    fatal("-n " + std::to_string(o.ranks) + " does not match the mesh of '" +
          plan.entry + "', which has " + std::to_string(plan.devices) +
          " devices");
  for (auto &[name, path] : o.inputs)
    if (access(path.c_str(), R_OK) != 0)
      fatal("cannot open input '" + name + "' file '" + path + "'");
  if (!o.loadWeights.empty() && access(o.loadWeights.c_str(), R_OK) != 0)
    fatal("--load-weights: cannot open '" + o.loadWeights + "'");
}

/// Starts the runtime on this rank and declares the mesh.
par_rt_context_t *startRuntime(const RunPlan &plan, int *argc, char ***argv) {
  const RunOptions &o = plan.options;
  par_rt_options_t ropts;
  par_rt_options_initialize(&ropts);
  ropts.backend = o.backend == "cuda" ? PAR_BACKEND_CUDA : PAR_BACKEND_CPU;
  par_rt_context_t *ctx = nullptr;
  checkRuntime(par_rt_context_create(&ropts, argc, argv, &ctx), ctx,
               "cannot start the " + o.backend + " backend");
  if (ropts.backend == PAR_BACKEND_CUDA && plan.target == "cpu")
    fatal("the artifact was compiled for the CPU; compile with par-compile "
          "--target cuda");
  int64_t world = par_rt_context_world_size(ctx);
  if (world != o.ranks)
    fatal("started with " + std::to_string(world) + " ranks but -n " +
          std::to_string(o.ranks));
  checkRuntime(
      par_rt_context_set_mesh(ctx, plan.mesh.size(), plan.mesh.data()),
      ctx, "mesh of '" + plan.entry + "'");
  return ctx;
}

} // namespace

bool RunPlan::nothingToTrain(bool print) const {
  if (options.train.steps > resumedStep)
    return false;
  if (print && options.train.steps > 0)
    printf("%s: the checkpoint is at step %lld of --steps %lld: nothing to "
           "train\n",
           toolName().c_str(), (long long)resumedStep,
           (long long)options.train.steps);
  return true;
}

bool RunPlan::checkpointDue(int64_t step) const {
  const CheckpointOptions &c = options.checkpoint;
  if (c.dir.empty())
    return false;
  return step == options.train.steps || (c.every > 0 && step % c.every == 0);
}

RunPlan planRun(const RunOptions &o) {
  struct stat st;
  if (stat(o.artifact.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    fatal("cannot open artifact directory '" + o.artifact + "'");
  // The manifest alone (the launcher needs the mesh, not the code).
  Session manifest(o.artifact, PAR_PROGRAM_SHARDED, nullptr,
                   /*loadCode=*/false);
  RunPlan p;
  p.options = o;
  p.target = manifest.target();
  // A GPU program needs the CUDA backend (checked before any rank starts);
  // a CPU program on --backend cuda is refused once the backend is up
  // (without a GPU, starting it fails first, with its own message).
  if (o.backend == "cpu" && p.target != "cpu")
    fatal("'" + o.artifact + "' was compiled for " + p.target +
          "; run it with --backend cuda");
  p.entry = chooseEntry(manifest, o);
  Function entry = manifest.lookup(p.entry);
  p.mesh = entry.axisSizes;
  p.devices = entry.devices();
  p.seed = o.seed;
  // --resume: the checkpoint's step and seed (a missing or bad checkpoint
  // fails here, before any rank starts).
  if (!o.resume.empty()) {
    CheckpointStart start = readCheckpointStart(o);
    p.seed = start.seed;
    p.resumedStep = start.step;
  }
  resolveDataArgs(manifest, p);
  par_pipeline_info_t pipe = manifest.pipeline();
  if (pipe.present && !o.pipeline && o.train.steps > 0 && o.entry.empty())
    p.pipelineNote =
        "par-run: note: '" + o.artifact + "' is pipelined (" +
        std::to_string(pipe.num_stages) + " stages on " +
        std::to_string(pipe.p) + " pipeline ranks" +
        (pipe.schedule ? std::string(", ") + pipe.schedule : "") +
        "); without --pipeline every rank trains its unpipelined step '" +
        p.entry + "' (the pipeline axis replicated); --pipeline runs the "
        "pipeline\n";
  return p;
}

int runJob(const RunPlan &plan, int argc, char **argv, RankBody body) {
  const RunOptions &o = plan.options;
  exportRunEnvironment(o);
  bool hostsGiven = !o.hostfile.empty() || !o.hosts.empty();
  if (!insideMPIJob()) {
    checkBeforeLaunch(plan);
    fputs(plan.pipelineNote.c_str(), stderr);
    if (o.ranks > 1 || hostsGiven)
      return launchJob(o.ranks, {o.hostfile, o.hosts}, threadsPerRank(o),
                       argc, argv);
    usePrivateSessionDir(); // one rank: an MPI singleton in this process
  } else if (hostsGiven && !getenv("PAR_RUN_WORKER")) {
    fatal("--hostfile/-H place the ranks par-run starts, but this par-run "
          "is already a rank of an MPI job (mpirun or srun placed it): drop "
          "them");
  }
  par_rt_context_t *ctx = startRuntime(plan, &argc, &argv);
  if (par_rt_context_rank(ctx) == 0 && plan.target == "cpu")
    printf("%s: BLAS: %s; %d thread%s a rank (loops and GEMMs)\n",
           toolName().c_str(), par_rt_blas_kernels(), par_rt_threads(),
           par_rt_threads() == 1 ? "" : "s");
  int status = body(ctx, plan);
  fflush(stdout);
  par_rt_barrier(ctx);
  par_rt_context_destroy(ctx);
  return status;
}

} // namespace par::tooling

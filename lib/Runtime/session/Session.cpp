//===- Session.cpp - Loading and calling compiled par programs ------------===//
//
// The session API of par_session.h. A session owns its manifest, the
// dlopen'ed program and one par_function_t per manifest entry; the C
// structs handed out point into them. Calls marshal memref descriptors the
// way MLIR's packed C interface (par_packed_<name>) expects: argument i is
// a descriptor {allocated, aligned, offset, sizes[r], strides[r]}. A CPU
// program returns its results as such descriptors, one after the other, in
// a buffer passed first; a GPU program (target "cuda:<chip>") takes
// out-params instead (argv = the inputs' descriptors, then the outputs',
// no result slot; every pointer device memory) and writes its results into
// the caller's buffers (docs/Architecture.md). Its device memory and errors
// go through libpar_runtime_gpu.so's par_gpu_* C API, resolved with dlsym
// on the program's handle (the library is one of its DT_NEEDED); the
// session declares the function types itself and does not link it.
//
//===----------------------------------------------------------------------===//

#include "par/Runtime/par_session.h"

#include "Layout.h"
#include "par/Manifest/Manifest.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <memory>
#include <set>
#include <string>
#include <vector>

using namespace par::session;
using par::manifest::Manifest;
using par::manifest::PipelineSpec;
using par::manifest::StageSpec;

/// libpar_runtime_gpu.so's C API (include/par/Runtime/par_gpu.h): 0 = ok,
/// else the text is par_gpu_last_error's.
struct GpuApi {
  const char *(*lastError)(void) = nullptr;
  void (*clearError)(void) = nullptr;
  int (*alloc)(void **, size_t) = nullptr;
  int (*free)(void *) = nullptr;
  int (*copy)(void *, const void *, size_t) = nullptr;
  int (*memsetZero)(void *, size_t) = nullptr;
  int (*synchronize)(void) = nullptr;
};

struct par_buffer_t {
  void *data = nullptr;
  size_t bytes = 0;
  /// A CPU program's result taken as the buffer (par_function_call_new):
  /// the allocation it lies in, freed with par_rt_free and counted by the
  /// runtime's allocator; null for the session's own (calloc, reserved).
  void *programAlloc = nullptr;
};

struct par_function_t {
  par_session_t *session = nullptr;
  const FunctionSpec *spec = nullptr;
  std::vector<par_mesh_axis_t> axes;
  /// Per input and output (par_io_t), the shardings as par_tensor_info_t
  /// lists them: each dimension's axis count, and the axes one dimension
  /// after the other.
  std::vector<std::vector<int64_t>> dimAxisCounts[2], dimAxes[2];
  void (*entry)(void **) = nullptr;
};

struct par_session_t {
  std::string artifact, manifestPath, soPath;
  par_session_options_t options;
  Manifest manifest;
  std::vector<std::unique_ptr<par_function_t>> functions;
  // The pipeline's stage table and programs, as the C API hands them out.
  std::vector<par_pipeline_stage_t> stages;
  std::vector<par_pipeline_program_t> programs;
  void *handle = nullptr;
  std::string error;
  int64_t rank = 0, world = 1;
  bool device = false; // a GPU program (target "cuda...")
  GpuApi gpu;
  std::set<par_buffer_t *> buffers; // live session buffers

  par_status_t fail(par_status_t s, const std::string &msg) {
    error = msg;
    return s;
  }
  /// A par_gpu_* call's status: on failure the session error is `what`
  /// and par_gpu_last_error's text.
  par_status_t gpuCheck(int rc, const std::string &what) {
    if (rc == 0)
      return PAR_OK;
    const char *e = gpu.lastError ? gpu.lastError() : nullptr;
    return fail(PAR_ERR_UNAVAILABLE,
                what + " on the GPU: " +
                    (e && *e ? e : "error " + std::to_string(rc)));
  }
};

namespace {

std::string createError; // par_session_last_error(NULL)

/// A memref descriptor: {alloc, aligned, offset, sizes[r], strides[r]}.
std::vector<int64_t> descriptor(const void *data,
                                const std::vector<int64_t> &shape) {
  std::vector<int64_t> d;
  d.push_back((int64_t)(intptr_t)data);
  d.push_back((int64_t)(intptr_t)data);
  d.push_back(0);
  for (int64_t s : shape)
    d.push_back(s);
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = (int64_t)shape.size() - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  for (int64_t s : strides)
    d.push_back(s);
  return d;
}

const Tensor *tensorOf(const par_function_t *fn, par_io_t io,
                           int64_t index) {
  const std::vector<Tensor> &list =
      io == PAR_INPUT ? fn->spec->inputs : fn->spec->outputs;
  if (index < 0 || index >= (int64_t)list.size())
    return nullptr;
  return &list[index];
}

par_status_t badTensor(const par_function_t *fn, par_io_t io, int64_t index) {
  return fn->session->fail(PAR_ERR_INVALID_ARGUMENT,
                           "'" + fn->spec->name + "' has no " +
                               (io == PAR_INPUT ? "arg" : "result") +
                               std::to_string(index));
}

par_status_t openCode(par_session_t *s) {
  s->handle = dlopen(s->soPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!s->handle)
    return s->fail(PAR_ERR_UNAVAILABLE, "cannot load program '" + s->soPath +
                                            "': " + dlerror());
  if (!s->device)
    return PAR_OK;
  // The GPU API of libpar_runtime_gpu.so, which the program links: dlsym on
  // its handle searches it and its dependencies.
  GpuApi &g = s->gpu;
  struct {
    const char *name;
    void **slot;
  } syms[] = {{"par_gpu_last_error", (void **)&g.lastError},
              {"par_gpu_clear_error", (void **)&g.clearError},
              {"par_gpu_alloc", (void **)&g.alloc},
              {"par_gpu_free", (void **)&g.free},
              {"par_gpu_copy", (void **)&g.copy},
              {"par_gpu_memset_zero", (void **)&g.memsetZero},
              {"par_gpu_synchronize", (void **)&g.synchronize}};
  for (auto &sym : syms) {
    *sym.slot = dlsym(s->handle, sym.name);
    if (!*sym.slot)
      return s->fail(PAR_ERR_UNAVAILABLE,
                     "program '" + s->soPath + "' is compiled for " +
                         s->manifest.target + ", but libpar_runtime_gpu.so " +
                         "is not loaded with it (no '" + sym.name +
                         "'; a cuda artifact links it: rebuild it with " +
                         "par-compile --target cuda)");
  }
  return PAR_OK;
}

/// The memref descriptor of `data` for tensor `t`'s local block.
std::vector<int64_t> localDescriptor(const void *data, const Tensor &t) {
  return descriptor(data, t.local);
}

int64_t localBytes(const Tensor &t) {
  return t.localCount * par_dtype_info(t.dtype)->element_size;
}

/// A result of a CPU program's call: where its local block is, and the
/// allocation that holds it when the program allocated it for this result
/// alone (null when it is an argument's memory or another result's).
struct HostResult {
  const char *data;
  char *alloc;
};

/// Runs a CPU program on host arguments. Its results come back as
/// descriptors of memory the program allocated (or of an input): each
/// result's block, and the allocation only the first result in it owns.
std::vector<HostResult> runHost(par_function_t *fn,
                                const std::vector<const void *> &args) {
  const FunctionSpec &f = *fn->spec;
  std::vector<std::vector<int64_t>> argDescs;
  for (size_t i = 0; i < f.inputs.size(); ++i)
    argDescs.push_back(localDescriptor(args[i], f.inputs[i]));
  size_t resultWords = 0;
  for (const Tensor &t : f.outputs)
    resultWords += 3 + 2 * t.local.size();
  std::vector<int64_t> results(resultWords + 1, 0);
  std::vector<void *> argv;
  if (!f.outputs.empty())
    argv.push_back(results.data());
  for (std::vector<int64_t> &d : argDescs)
    argv.push_back(d.data());
  par_rt_memory_set_scope(f.name.c_str());
  fn->entry(argv.data());
  par_rt_memory_set_scope(nullptr);
  // A result may alias an input or another result: each allocation is
  // owned once.
  std::set<intptr_t> owned;
  for (size_t i = 0; i < f.inputs.size(); ++i)
    owned.insert((intptr_t)args[i]);
  std::vector<HostResult> out;
  size_t w = 0;
  for (const Tensor &t : f.outputs) {
    char *alloc = (char *)(intptr_t)results[w];
    char *aligned = (char *)(intptr_t)results[w + 1];
    int64_t es = par_dtype_info(t.dtype)->element_size;
    HostResult r{aligned + results[w + 2] * es, nullptr};
    if (!owned.count((intptr_t)aligned) && !owned.count((intptr_t)alloc)) {
      owned.insert((intptr_t)aligned);
      owned.insert((intptr_t)alloc);
      r.alloc = alloc;
    }
    out.push_back(r);
    w += 3 + 2 * t.local.size();
  }
  return out;
}

/// A CPU program's call on host memory: the results are copied into
/// `outputs` and what the program allocated is freed.
void callHost(par_function_t *fn, const void *const *inputs,
              void *const *outputs) {
  const FunctionSpec &f = *fn->spec;
  // A donated argument's buffer receives its result: the caller's when it
  // passed it as the output too, else the output, holding a copy of the
  // argument (which stays as it was).
  std::vector<const void *> args(inputs, inputs + f.inputs.size());
  for (size_t i = 0; i + 1 < f.donated.size(); i += 2) {
    int64_t r = f.donated[i], a = f.donated[i + 1];
    if (outputs[r] != inputs[a]) {
      memcpy(outputs[r], inputs[a], localBytes(f.inputs[a]));
      args[a] = outputs[r];
    }
  }
  std::vector<HostResult> results = runHost(fn, args);
  for (size_t k = 0; k < f.outputs.size(); ++k)
    if (results[k].data != outputs[k]) // a donated result is there already
      memcpy(outputs[k], results[k].data, localBytes(f.outputs[k]));
  for (const HostResult &r : results)
    if (r.alloc)
      par_rt_free(r.alloc);
}

/// Frees a session buffer's memory and the struct (it is no longer in the
/// session's set).
void releaseBuffer(par_session_t *s, par_buffer_t *b) {
  if (b->programAlloc) {
    par_rt_free(b->programAlloc); // the allocator counted it
  } else {
    par_rt_memory_release(int64_t(b->bytes));
    if (s->device)
      s->gpu.free(b->data);
    else
      free(b->data);
  }
  delete b;
}

/// A GPU program's call on device memory (the out-param convention): argv
/// holds the inputs' descriptors, then the outputs'; the program writes the
/// outputs and has finished its GPU work when it returns. Its errors are
/// the GPU library's sticky error.
par_status_t callDevice(par_function_t *fn, void *const *inputs,
                        void *const *outputs) {
  const FunctionSpec &f = *fn->spec;
  par_session_t *s = fn->session;
  std::vector<std::vector<int64_t>> descs;
  for (size_t i = 0; i < f.inputs.size(); ++i)
    descs.push_back(localDescriptor(inputs[i], f.inputs[i]));
  for (size_t k = 0; k < f.outputs.size(); ++k)
    descs.push_back(localDescriptor(outputs[k], f.outputs[k]));
  std::vector<void *> argv;
  for (std::vector<int64_t> &d : descs)
    argv.push_back(d.data());
  if (const char *e = s->gpu.lastError())
    return s->fail(PAR_ERR_UNAVAILABLE,
                   "cannot run '" + f.name +
                       "': an earlier GPU call failed: " + e);
  fn->entry(argv.data());
  if (const char *e = s->gpu.lastError())
    return s->fail(PAR_ERR_UNAVAILABLE,
                   "'" + f.name + "' failed on the GPU: " + e);
  return PAR_OK;
}

par_status_t needCode(par_function_t *fn) {
  if (!fn->entry)
    return fn->session->fail(PAR_ERR_UNAVAILABLE, "'" + fn->spec->name +
                                                      "' was loaded without "
                                                      "its code");
  return PAR_OK;
}

/// Device memory of a GPU session for one call (par_function_call on host
/// memory), freed at the end.
struct DeviceScratch {
  par_session_t *s;
  std::vector<void *> ptrs;
  explicit DeviceScratch(par_session_t *s) : s(s) {}
  ~DeviceScratch() {
    for (void *p : ptrs)
      s->gpu.free(p);
  }
  par_status_t alloc(size_t bytes, void **out) {
    *out = nullptr;
    if (par_status_t st = s->gpuCheck(s->gpu.alloc(out, std::max<size_t>(
                                                            1, bytes)),
                                      "allocating " + std::to_string(bytes) +
                                          " bytes"))
      return st;
    ptrs.push_back(*out);
    return PAR_OK;
  }
};

/// Checks that `b` is one of the session's buffers with `bytes` in it.
par_status_t checkRange(par_session_t *s, const par_buffer_t *b, size_t bytes,
                        const char *what) {
  if (!b || !s->buffers.count(const_cast<par_buffer_t *>(b)))
    return s->fail(PAR_ERR_INVALID_ARGUMENT,
                   std::string(what) + ": not a buffer of this session");
  if (bytes > b->bytes)
    return s->fail(PAR_ERR_INVALID_ARGUMENT,
                   std::string(what) + ": " + std::to_string(bytes) +
                       " bytes asked of a buffer of " +
                       std::to_string(b->bytes));
  return PAR_OK;
}

/// A copy in any direction: memcpy on the CPU, par_gpu_copy (UVA) on a GPU.
par_status_t copyBytes(par_session_t *s, void *dst, const void *src,
                       size_t bytes, const char *what) {
  if (bytes == 0)
    return PAR_OK;
  if (!s->device) {
    memcpy(dst, src, bytes);
    return PAR_OK;
  }
  return s->gpuCheck(s->gpu.copy(dst, src, bytes),
                     std::string(what) + " " + std::to_string(bytes) +
                         " bytes");
}


} // namespace

extern "C" {

void par_session_options_initialize(par_session_options_t *options) {
  options->program = PAR_PROGRAM_SHARDED;
  options->context = nullptr;
  options->load_code = 1;
}

par_status_t par_session_create(const char *artifact_dir,
                                const par_session_options_t *options,
                                par_session_t **out_session) {
  *out_session = nullptr;
  createError.clear();
  auto s = std::make_unique<par_session_t>();
  par_session_options_initialize(&s->options);
  if (options)
    s->options = *options;
  std::string stem =
      s->options.program == PAR_PROGRAM_REFERENCE ? "reference" : "sharded";
  s->artifact = artifact_dir ? artifact_dir : "";
  s->manifestPath = s->artifact + "/" + stem + ".json";
  s->soPath = s->artifact + "/" + stem + ".so";
  if (!par::manifest::readManifest(s->manifestPath, s->manifest, createError))
    return PAR_ERR_INVALID_ARGUMENT;
  s->device = s->manifest.target.rfind("cuda", 0) == 0;
  if (s->options.load_code && openCode(s.get()) != PAR_OK) {
    createError = s->error;
    return PAR_ERR_UNAVAILABLE;
  }
  if (s->options.context) {
    s->rank = par_rt_context_rank(s->options.context);
    s->world = par_rt_context_world_size(s->options.context);
  }
  for (const FunctionSpec &f : s->manifest.functions) {
    auto fn = std::make_unique<par_function_t>();
    fn->session = s.get();
    fn->spec = &f;
    for (size_t i = 0; i < f.sizes.size(); ++i)
      fn->axes.push_back({f.axisNames[i].c_str(), f.sizes[i]});
    for (par_io_t io : {PAR_INPUT, PAR_OUTPUT})
      for (const Tensor &t : io == PAR_INPUT ? f.inputs : f.outputs) {
        std::vector<int64_t> counts, axes;
        for (const std::vector<int64_t> &d : t.dims) {
          counts.push_back(d.size());
          axes.insert(axes.end(), d.begin(), d.end());
        }
        fn->dimAxisCounts[io].push_back(std::move(counts));
        fn->dimAxes[io].push_back(std::move(axes));
      }
    s->functions.push_back(std::move(fn));
  }
  auto orNull = [](const std::string &name) {
    return name.empty() ? nullptr : name.c_str();
  };
  for (const StageSpec &st : s->manifest.pipeline.stages)
    s->stages.push_back({orNull(st.forward), orNull(st.backward),
                         orNull(st.inputGrad), orNull(st.weightGrad),
                         orNull(st.update), orNull(st.stashForward),
                         orNull(st.stashBackward), orNull(st.stashInputGrad),
                         orNull(st.stashWeightGrad)});
  for (const std::vector<par_pipeline_action_t> &p :
       s->manifest.pipeline.programs)
    s->programs.push_back({static_cast<int64_t>(p.size()), p.data()});
  *out_session = s.release();
  return PAR_OK;
}

void par_session_destroy(par_session_t *session) {
  if (!session)
    return;
  for (par_buffer_t *b : session->buffers)
    releaseBuffer(session, b);
  if (session->handle)
    dlclose(session->handle);
  delete session;
}

const char *par_session_last_error(const par_session_t *session) {
  return session ? session->error.c_str() : createError.c_str();
}

const char *par_session_manifest_path(const par_session_t *session) {
  return session->manifestPath.c_str();
}

const char *par_session_target(const par_session_t *session) {
  return session->manifest.target.c_str();
}

int par_session_on_device(const par_session_t *session) {
  return session->device ? 1 : 0;
}

par_status_t par_session_buffer_alloc(par_session_t *s, size_t bytes,
                                      par_buffer_t **out_buffer) {
  *out_buffer = nullptr;
  auto b = std::make_unique<par_buffer_t>();
  b->bytes = bytes;
  size_t room = std::max<size_t>(1, bytes); // data is never null
  // Session buffers are memory held for the programs (the arguments and
  // results a runner keeps): counted against the process's limit.
  if (par_rt_memory_reserve(int64_t(bytes)) != 0) {
    par_rt_memory_stats_t m;
    par_rt_memory_stats(&m);
    auto mib = [](int64_t b) {
      char buf[32];
      snprintf(buf, sizeof buf, "%.2f MiB", (double)b / (1024.0 * 1024.0));
      return std::string(buf);
    };
    return s->fail(PAR_ERR_OUT_OF_MEMORY,
                   "cannot allocate a buffer of " + std::to_string(bytes) +
                       " bytes: " + mib(m.live_bytes) + " of the " +
                       mib(m.limit_bytes) + " memory limit are in use");
  }
  struct Unreserve {
    int64_t bytes;
    ~Unreserve() {
      if (bytes)
        par_rt_memory_release(bytes);
    }
  } unreserve{int64_t(bytes)};
  if (!s->device) {
    b->data = calloc(1, room);
    if (!b->data)
      return s->fail(PAR_ERR_OUT_OF_MEMORY,
                     "cannot allocate " + std::to_string(bytes) + " bytes");
  } else {
    if (!s->handle)
      return s->fail(PAR_ERR_UNAVAILABLE,
                     "session buffers of a " + s->manifest.target +
                         " program need its code loaded");
    std::string what = "allocating " + std::to_string(bytes) + " bytes";
    if (par_status_t st = s->gpuCheck(s->gpu.alloc(&b->data, room), what))
      return st;
    if (par_status_t st = s->gpuCheck(s->gpu.memsetZero(b->data, room),
                                      "zero-filling " + std::to_string(bytes) +
                                          " bytes")) {
      s->gpu.free(b->data);
      return st;
    }
  }
  *out_buffer = b.get();
  s->buffers.insert(b.release());
  unreserve.bytes = 0;
  return PAR_OK;
}

void par_session_buffer_free(par_session_t *s, par_buffer_t *buffer) {
  if (!buffer || !s->buffers.erase(buffer))
    return;
  releaseBuffer(s, buffer);
}

size_t par_buffer_size(const par_buffer_t *buffer) { return buffer->bytes; }

void *par_buffer_data(const par_buffer_t *buffer) { return buffer->data; }


par_status_t par_session_buffer_upload(par_session_t *s, par_buffer_t *dst,
                                       const void *src, size_t bytes) {
  if (par_status_t st = checkRange(s, dst, bytes, "upload"))
    return st;
  return copyBytes(s, dst->data, src, bytes, "uploading");
}

par_status_t par_session_buffer_download(par_session_t *s,
                                         const par_buffer_t *src, void *dst,
                                         size_t bytes) {
  if (par_status_t st = checkRange(s, src, bytes, "download"))
    return st;
  return copyBytes(s, dst, src->data, bytes, "downloading");
}

par_status_t par_session_buffer_copy(par_session_t *s, par_buffer_t *dst,
                                     const par_buffer_t *src, size_t bytes) {
  if (par_status_t st = checkRange(s, dst, bytes, "copy"))
    return st;
  if (par_status_t st = checkRange(s, src, bytes, "copy"))
    return st;
  return copyBytes(s, dst->data, src->data, bytes, "copying");
}

par_status_t par_session_buffer_zero(par_session_t *s, par_buffer_t *b) {
  if (par_status_t st = checkRange(s, b, 0, "zero"))
    return st;
  if (!s->device) {
    memset(b->data, 0, b->bytes);
    return PAR_OK;
  }
  return s->gpuCheck(s->gpu.memsetZero(b->data, std::max<size_t>(1, b->bytes)),
                     "zero-filling " + std::to_string(b->bytes) + " bytes");
}

par_status_t par_session_lookup_function(par_session_t *s, const char *name,
                                         par_function_t **out_function) {
  *out_function = nullptr;
  std::string want = name ? name : "";
  for (std::unique_ptr<par_function_t> &fn : s->functions) {
    if (!want.empty() && fn->spec->name != want)
      continue;
    if (!fn->spec->error.empty())
      return s->fail(PAR_ERR_INVALID_ARGUMENT, fn->spec->error);
    if (s->options.load_code && !fn->entry) {
      std::string sym = "par_packed_" + fn->spec->name;
      fn->entry = (void (*)(void **))dlsym(s->handle, sym.c_str());
      if (!fn->entry)
        return s->fail(PAR_ERR_INVALID_ARGUMENT, "program '" + s->soPath +
                                                     "' has no entry point '" +
                                                     sym + "'");
    }
    *out_function = fn.get();
    return PAR_OK;
  }
  return s->fail(PAR_ERR_INVALID_ARGUMENT, "manifest '" + s->manifestPath +
                                               "' has no function named '" +
                                               want + "'");
}

int64_t par_session_function_count(const par_session_t *s) {
  return int64_t(s->functions.size());
}

const char *par_session_function_name(const par_session_t *s,
                                      int64_t index) {
  if (index < 0 || index >= int64_t(s->functions.size()))
    return nullptr;
  return s->functions[index]->spec->name.c_str();
}

par_status_t par_session_pipeline(par_session_t *s,
                                  par_pipeline_info_t *out) {
  const PipelineSpec &p = s->manifest.pipeline;
  memset(out, 0, sizeof(*out));
  if (!p.error.empty())
    return s->fail(PAR_ERR_INVALID_ARGUMENT, p.error);
  out->present = p.present;
  out->func = p.hasFunc ? p.func.c_str() : nullptr;
  out->step = p.step.empty() ? nullptr : p.step.c_str();
  out->logits = p.logits.empty() ? nullptr : p.logits.c_str();
  out->axis = p.hasAxis ? p.axis.c_str() : nullptr;
  out->schedule = p.hasSchedule ? p.schedule.c_str() : nullptr;
  out->backward = p.hasBackward ? p.backward.c_str() : nullptr;
  out->p = p.p;
  out->m = p.m;
  out->v = p.v;
  out->num_stages = s->stages.size();
  out->stages = s->stages.data();
  out->num_programs = s->programs.size();
  out->programs = s->programs.data();
  return PAR_OK;
}

void par_function_info(const par_function_t *fn, par_function_info_t *out) {
  const FunctionSpec &f = *fn->spec;
  out->name = f.name.c_str();
  out->num_inputs = f.inputs.size();
  out->num_outputs = f.outputs.size();
  out->num_axes = fn->axes.size();
  out->axes = fn->axes.data();
  out->devices = 1;
  for (int64_t size : f.sizes)
    out->devices *= size;
  out->num_feedback = f.feedback.size() / 2;
  out->feedback = f.feedback.data();
  out->num_donated = f.donated.size() / 2;
  out->donated = f.donated.data();
  out->micro_batches = f.microBatches;
  out->stage = f.stage;
  out->num_stage_args = f.stageArgs.size();
  out->stage_args = f.stageArgs.data();
  auto orNull = [](const std::string &name) {
    return name.empty() ? nullptr : name.c_str();
  };
  out->grad = orNull(f.grad);
  out->step = orNull(f.step);
  out->update = orNull(f.update);
  out->logits = orNull(f.logits);
  out->compute_type = orNull(f.computeType);
  out->loss_scale_result = f.lossScaleResult;
  out->finite_result = f.finiteResult;
  out->min_loss_scale = f.minLossScale;
  out->compression_method = orNull(f.compressionMethod);
  out->compressed_bytes = f.compressedBytes;
  out->uncompressed_bytes = f.uncompressedBytes;
}

par_status_t par_function_tensor(const par_function_t *fn, par_io_t io,
                                 int64_t index, par_tensor_info_t *out) {
  const Tensor *t = tensorOf(fn, io, index);
  if (!t)
    return badTensor(fn, io, index);
  out->dtype = t->dtype;
  out->rank = t->global.size();
  out->global_shape = t->global.data();
  out->local_shape = t->local.data();
  out->global_count = t->globalCount;
  out->local_count = t->localCount;
  out->dim_axis_counts = fn->dimAxisCounts[io][index].data();
  out->dim_axes = fn->dimAxes[io][index].data();
  out->num_partial = t->partial.size();
  out->partial_axes = t->partial.data();
  out->partial_kind = t->partialKind;
  out->init = t->init.c_str();
  out->role = t->role.c_str();
  out->name = t->name.c_str();
  out->num_aliases = t->aliases.size();
  out->vocab = t->vocab;
  out->slice_of = t->sliceOf.c_str();
  out->slice_dim = t->sliceDim;
  out->slice_offset = t->sliceOffset;
  out->slice_extent = t->sliceExtent;
  return PAR_OK;
}

par_status_t par_function_memory_plan(const par_function_t *fn,
                                      par_memory_plan_t *out) {
  const FunctionSpec &f = *fn->spec;
  *out = par_memory_plan_t{};
  if (f.memoryPeak < 0)
    return fn->session->fail(PAR_ERR_INVALID_ARGUMENT,
                             "'" + f.name + "' has no memory plan");
  out->peak_bytes = f.memoryPeak;
  out->argument_bytes = f.memoryArguments;
  out->result_bytes = f.memoryResults;
  out->program_peak_bytes = f.memoryProgramPeak;
  auto part = [&](const char *kind) {
    auto it = f.memoryAtPeak.find(kind);
    return it == f.memoryAtPeak.end() ? int64_t(0) : it->second;
  };
  out->parameters = part("parameters");
  out->gradients = part("gradients");
  out->optimizer_state = part("optimizer_state");
  out->activations = part("activations");
  out->temporaries = part("temporaries");
  out->communication = part("communication");
  out->state = part("state");
  out->data = part("data");
  return PAR_OK;
}

const char *par_function_allocation_types(const par_function_t *fn,
                                          int64_t bytes) {
  auto it = fn->spec->memoryTypes.find(bytes);
  return it == fn->spec->memoryTypes.end() ? nullptr : it->second.c_str();
}

const char *par_function_tensor_alias(const par_function_t *fn, par_io_t io,
                                      int64_t index, int64_t k) {
  const Tensor *t = tensorOf(fn, io, index);
  if (!t || k < 0 || k >= (int64_t)t->aliases.size())
    return nullptr;
  return t->aliases[k].c_str();
}

int64_t par_function_rank(const par_function_t *fn) {
  return fn->session->rank;
}

void par_function_coords(const par_function_t *fn, int64_t rank,
                         int64_t *out_coords) {
  std::vector<int64_t> c = coordsOf(fn->spec->sizes, rank);
  std::copy(c.begin(), c.end(), out_coords);
}

int64_t par_function_rank_of(const par_function_t *fn,
                             const int64_t *coords) {
  const std::vector<int64_t> &sizes = fn->spec->sizes;
  return rankOf(sizes, std::vector<int64_t>(coords, coords + sizes.size()));
}

par_status_t par_function_call(par_function_t *fn, const void *const *inputs,
                               void *const *outputs) {
  if (par_status_t st = needCode(fn))
    return st;
  par_session_t *s = fn->session;
  if (!s->device) {
    callHost(fn, inputs, outputs);
    return PAR_OK;
  }
  // A GPU program: device copies of the inputs and room for the outputs.
  const FunctionSpec &f = *fn->spec;
  DeviceScratch scratch(s);
  std::vector<void *> in(f.inputs.size()), out(f.outputs.size());
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    int64_t bytes = localBytes(f.inputs[i]);
    if (par_status_t st = scratch.alloc(bytes, &in[i]))
      return st;
    if (par_status_t st = s->gpuCheck(s->gpu.copy(in[i], inputs[i], bytes),
                                      "copying arg" + std::to_string(i) +
                                          " of '" + f.name + "' in"))
      return st;
  }
  for (size_t k = 0; k < f.outputs.size(); ++k)
    if (par_status_t st = scratch.alloc(localBytes(f.outputs[k]), &out[k]))
      return st;
  if (par_status_t st = callDevice(fn, in.data(), out.data()))
    return st;
  for (size_t k = 0; k < f.outputs.size(); ++k)
    if (par_status_t st = s->gpuCheck(
            s->gpu.copy(outputs[k], out[k], localBytes(f.outputs[k])),
            "copying result" + std::to_string(k) + " of '" + f.name + "' out"))
      return st;
  return PAR_OK;
}

/// The memory of a call's input buffers, each checked to be one of the
/// session's and large enough (an input may be passed twice).
par_status_t inputBuffers(par_function_t *fn, par_buffer_t *const *inputs,
                          std::vector<void *> &in) {
  par_session_t *s = fn->session;
  const FunctionSpec &f = *fn->spec;
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    par_buffer_t *b = inputs[i];
    if (!b || !s->buffers.count(b))
      return s->fail(PAR_ERR_INVALID_ARGUMENT,
                     "'" + f.name + "' arg" + std::to_string(i) +
                         " is not a buffer of this session");
    if (b->bytes < (size_t)localBytes(f.inputs[i]))
      return s->fail(PAR_ERR_INVALID_ARGUMENT,
                     "'" + f.name + "' arg" + std::to_string(i) + " needs " +
                         std::to_string(localBytes(f.inputs[i])) +
                         " bytes, its buffer has " + std::to_string(b->bytes));
    in.push_back(b->data);
  }
  return PAR_OK;
}

par_status_t par_function_call_buffers(par_function_t *fn,
                                       par_buffer_t *const *inputs,
                                       par_buffer_t *const *outputs) {
  if (par_status_t st = needCode(fn))
    return st;
  par_session_t *s = fn->session;
  const FunctionSpec &f = *fn->spec;
  std::vector<void *> in, out;
  std::set<const par_buffer_t *> seen;
  auto take = [&](par_buffer_t *b, const Tensor &t, const char *what,
                  size_t i, std::vector<void *> &ptrs) -> par_status_t {
    std::string name = "'" + f.name + "' " + what + std::to_string(i);
    if (!b || !s->buffers.count(b))
      return s->fail(PAR_ERR_INVALID_ARGUMENT,
                     name + " is not a buffer of this session");
    if (b->bytes < (size_t)localBytes(t))
      return s->fail(PAR_ERR_INVALID_ARGUMENT,
                     name + " needs " + std::to_string(localBytes(t)) +
                         " bytes, its buffer has " + std::to_string(b->bytes));
    if (!seen.insert(b).second)
      return s->fail(PAR_ERR_INVALID_ARGUMENT,
                     name + "'s buffer is also an argument's or another " +
                         "result's (outputs must not alias inputs or each " +
                         "other: "
                         "keep two buffer sets for fed-back state and swap "
                         "them)");
    ptrs.push_back(b->data);
    return PAR_OK;
  };
  if (par_status_t st = inputBuffers(fn, inputs, in))
    return st;
  // A donated pair may share its buffer (the update in place) when no
  // other argument reads that buffer.
  std::map<int64_t, int64_t> donatedArg; // result -> argument
  for (size_t i = 0; i + 1 < f.donated.size(); i += 2)
    donatedArg[f.donated[i]] = f.donated[i + 1];
  std::set<const par_buffer_t *> inPlace;
  for (auto [r, a] : donatedArg)
    if (outputs[r] && outputs[r] == inputs[a]) {
      for (size_t i = 0; i < f.inputs.size(); ++i)
        if ((int64_t)i != a && inputs[i] == inputs[a])
          return s->fail(PAR_ERR_INVALID_ARGUMENT,
                         "'" + f.name + "' arg" + std::to_string(a) +
                             " is donated to result" + std::to_string(r) +
                             " (updated in place) but its buffer is also arg" +
                             std::to_string(i));
      inPlace.insert(outputs[r]);
    }
  for (size_t i = 0; i < f.inputs.size(); ++i)
    if (!inPlace.count(inputs[i]))
      seen.insert(inputs[i]);
  out.reserve(f.outputs.size());
  for (size_t k = 0; k < f.outputs.size(); ++k)
    if (par_status_t st = take(outputs[k], f.outputs[k], "result", k, out))
      return st;
  if (!s->device) {
    callHost(fn, in.data(), out.data());
    return PAR_OK;
  }
  return callDevice(fn, in.data(), out.data());
}

par_status_t par_function_call_new(par_function_t *fn,
                                   par_buffer_t *const *inputs,
                                   par_buffer_t **out_results) {
  par_session_t *s = fn->session;
  const FunctionSpec &f = *fn->spec;
  for (size_t k = 0; k < f.outputs.size(); ++k)
    out_results[k] = nullptr;
  if (par_status_t st = needCode(fn))
    return st;
  // Results the program cannot hand over (device memory, donated
  // arguments): fresh buffers written by par_function_call_buffers.
  if (s->device || !f.donated.empty()) {
    std::vector<par_buffer_t *> outs(f.outputs.size(), nullptr);
    auto drop = [&] {
      for (par_buffer_t *b : outs)
        par_session_buffer_free(s, b);
    };
    for (size_t k = 0; k < f.outputs.size(); ++k)
      if (par_status_t st = par_session_buffer_alloc(
              s, localBytes(f.outputs[k]), &outs[k])) {
        drop();
        return st;
      }
    if (par_status_t st = par_function_call_buffers(fn, inputs, outs.data())) {
      drop();
      return st;
    }
    std::copy(outs.begin(), outs.end(), out_results);
    return PAR_OK;
  }
  std::vector<void *> in;
  if (par_status_t st = inputBuffers(fn, inputs, in))
    return st;
  std::vector<HostResult> results =
      runHost(fn, std::vector<const void *>(in.begin(), in.end()));
  par_status_t status = PAR_OK;
  for (size_t k = 0; k < f.outputs.size(); ++k) {
    const HostResult &r = results[k];
    // The program's allocation becomes the buffer (no copy) where it is a
    // pool block of exactly the result: the memory count then holds what
    // the buffer holds.
    if (r.alloc && r.data == r.alloc &&
        par_rt_alloc_bytes(r.alloc) == localBytes(f.outputs[k])) {
      auto b = std::make_unique<par_buffer_t>();
      b->data = const_cast<char *>(r.data);
      b->bytes = localBytes(f.outputs[k]);
      b->programAlloc = r.alloc;
      out_results[k] = b.get();
      s->buffers.insert(b.release());
      continue;
    }
    // An argument's memory, another result's or a part of an allocation:
    // a copy.
    if (status == PAR_OK)
      status = par_session_buffer_alloc(s, localBytes(f.outputs[k]),
                                        &out_results[k]);
    if (status == PAR_OK)
      memcpy(out_results[k]->data, r.data, localBytes(f.outputs[k]));
  }
  for (size_t k = 0; k < f.outputs.size(); ++k)
    if (results[k].alloc &&
        (!out_results[k] || !out_results[k]->programAlloc))
      par_rt_free(results[k].alloc);
  if (status != PAR_OK)
    for (size_t k = 0; k < f.outputs.size(); ++k) {
      par_session_buffer_free(s, out_results[k]);
      out_results[k] = nullptr;
    }
  return status;
}

par_status_t par_function_scatter(const par_function_t *fn, par_io_t io,
                                  int64_t index, const void *global,
                                  void *local) {
  const Tensor *t = tensorOf(fn, io, index);
  if (!t)
    return badTensor(fn, io, index);
  extractBlock(*fn->spec, *t, coordsOf(fn->spec->sizes, fn->session->rank),
               (const char *)global, (char *)local);
  return PAR_OK;
}

par_status_t par_function_gather(const par_function_t *fn, par_io_t io,
                                 int64_t index, const void *local,
                                 void *global_on_root,
                                 const int64_t *source_coords) {
  const Tensor *t = tensorOf(fn, io, index);
  if (!t)
    return badTensor(fn, io, index);
  par_session_t *s = fn->session;
  int64_t bytes = t->localCount * par_dtype_info(t->dtype)->element_size;
  std::vector<char> gathered(
      s->rank == 0 ? std::max<int64_t>(1, bytes * s->world) : 1);
  if (s->options.context) {
    par_rt_context_t *ctx = s->options.context;
    if (par_rt_gather_world(ctx, local, bytes, gathered.data()) != PAR_OK)
      return s->fail(PAR_ERR_COMMUNICATION,
                     std::string("gathering a result: ") +
                         par_rt_context_last_error(ctx));
  } else {
    memcpy(gathered.data(), local, bytes);
  }
  if (s->rank != 0)
    return PAR_OK;
  size_t n = fn->spec->sizes.size();
  std::vector<int64_t> source(n, 0);
  if (source_coords)
    source.assign(source_coords, source_coords + n);
  memset(global_on_root, 0,
         t->globalCount * par_dtype_info(t->dtype)->element_size);
  assembleBlocks(*fn->spec, *t, gathered.data(), s->world, source,
                 (char *)global_on_root);
  return PAR_OK;
}

} // extern "C"

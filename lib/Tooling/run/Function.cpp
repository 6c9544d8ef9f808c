//===- Function.cpp - C++ conveniences over the session API ---------------===//
//
// Copies the session's C structs into the tooling's value types once per
// lookup; calls go straight to par_function_call or, on session buffers,
// par_function_call_buffers.
//
//===----------------------------------------------------------------------===//

#include "par/Tooling/Function.h"

#include "par/Manifest/Schema.h"
#include "par/Tooling/Diagnostics.h"

#include <algorithm>

namespace par::tooling {

Buffer zeroBuffer(int64_t bytes) {
  return Buffer(std::max<int64_t>(1, bytes), 0);
}

SessionBuffer::SessionBuffer(par_session_t *session, int64_t bytes)
    : session(session), size(bytes) {
  check(par_session_buffer_alloc(session, bytes, &buffer));
}

SessionBuffer::SessionBuffer(par_session_t *session, par_buffer_t *buffer)
    : session(session), buffer(buffer), size(par_buffer_size(buffer)) {}

SessionBuffer::~SessionBuffer() {
  if (buffer)
    par_session_buffer_free(session, buffer);
}

SessionBuffer &SessionBuffer::operator=(SessionBuffer &&o) noexcept {
  if (this != &o) {
    if (buffer)
      par_session_buffer_free(session, buffer);
    session = o.session;
    buffer = o.buffer;
    size = o.size;
    o.buffer = nullptr;
    o.size = 0;
  }
  return *this;
}

void SessionBuffer::check(par_status_t s) const {
  if (s != PAR_OK)
    fatal(par_session_last_error(session));
}

void *SessionBuffer::data() const {
  return buffer ? par_buffer_data(buffer) : nullptr;
}

void SessionBuffer::upload(const void *src, int64_t bytes) {
  check(par_session_buffer_upload(session, buffer, src, bytes));
}

void SessionBuffer::download(void *dst, int64_t bytes) const {
  check(par_session_buffer_download(session, buffer, dst, bytes));
}

Buffer SessionBuffer::download() const {
  Buffer b = zeroBuffer(size);
  if (buffer)
    download(b.data(), size);
  return b;
}

double SessionBuffer::scalar(par_dtype_t dtype) const {
  char value[16] = {0};
  download(value, par_dtype_info(dtype)->element_size);
  return par_dtype_load(dtype, value, 0);
}

void SessionBuffer::copyFrom(const SessionBuffer &src) {
  check(par_session_buffer_copy(session, buffer, src.buffer, size));
}

void SessionBuffer::zero() { check(par_session_buffer_zero(session, buffer)); }

HostContextScope::HostContextScope(bool needed) {
  if (!needed)
    return;
  par_rt_options_t o;
  par_rt_options_initialize(&o);
  o.backend = PAR_BACKEND_CPU;
  o.world = PAR_WORLD_LOCAL;
  checkRuntime(par_rt_context_create(&o, nullptr, nullptr, &ctx), ctx,
               "cannot start a CPU context for the reference");
}

HostContextScope::~HostContextScope() { par_rt_context_destroy(ctx); }

namespace {

Tensor tensorFrom(const par_function_t *fn, par_io_t io, int64_t index,
                  const par_tensor_info_t &info) {
  Tensor t;
  t.setDtype(info.dtype);
  t.global.assign(info.global_shape, info.global_shape + info.rank);
  t.local.assign(info.local_shape, info.local_shape + info.rank);
  const int64_t *axes = info.dim_axes;
  for (int64_t i = 0; i < info.rank; ++i) {
    t.dims.emplace_back(axes, axes + info.dim_axis_counts[i]);
    axes += info.dim_axis_counts[i];
  }
  t.partial.assign(info.partial_axes, info.partial_axes + info.num_partial);
  t.partialKind = info.partial_kind;
  t.init = info.init;
  t.role = info.role ? info.role : "";
  t.name = info.name ? info.name : "";
  for (int64_t k = 0; k < info.num_aliases; ++k)
    if (const char *a = par_function_tensor_alias(fn, io, index, k))
      t.aliases.push_back(a);
  t.vocab = info.vocab;
  t.sliceOf = info.slice_of ? info.slice_of : "";
  t.sliceDim = info.slice_dim;
  t.sliceOffset = info.slice_offset;
  t.sliceExtent = info.slice_extent;
  t.globalCount = info.global_count;
  t.localCount = info.local_count;
  return t;
}

} // namespace

Function::Function(par_session_t *session, par_function_t *fn)
    : session(session), fn(fn) {
  par_function_info_t info;
  par_function_info(fn, &info);
  name = info.name;
  for (int64_t a = 0; a < info.num_axes; ++a) {
    axisNames.push_back(info.axes[a].name);
    axisSizes.push_back(info.axes[a].size);
  }
  for (par_io_t io : {PAR_INPUT, PAR_OUTPUT}) {
    int64_t n = io == PAR_INPUT ? info.num_inputs : info.num_outputs;
    for (int64_t i = 0; i < n; ++i) {
      par_tensor_info_t t;
      check(par_function_tensor(fn, io, i, &t));
      (io == PAR_INPUT ? inputs : outputs).push_back(tensorFrom(fn, io, i, t));
    }
  }
  for (int64_t i = 0; i < info.num_feedback; ++i)
    feedback.push_back({(size_t)info.feedback[2 * i],
                        (size_t)info.feedback[2 * i + 1]});
  for (int64_t i = 0; i < info.num_donated; ++i)
    donated.push_back({(size_t)info.donated[2 * i],
                       (size_t)info.donated[2 * i + 1]});
  microBatches = info.micro_batches;
  stage = info.stage;
  if (info.compute_type)
    computeType = info.compute_type;
  lossScaleResult = info.loss_scale_result;
  finiteResult = info.finite_result;
  minLossScale = info.min_loss_scale;
  if (info.compression_method)
    compression = Compression{info.compression_method, info.compressed_bytes,
                              info.uncompressed_bytes};
  stageArgs.assign(info.stage_args, info.stage_args + info.num_stage_args);
  for (auto [role, dst] : {std::pair<const char *, std::string *>{info.grad, &grad},
                           {info.step, &step},
                           {info.update, &update},
                           {info.logits, &logits}})
    if (role)
      *dst = role;
}

void Function::check(par_status_t s) const {
  if (s != PAR_OK)
    fatal(par_session_last_error(session));
}

std::vector<size_t> Function::errorFeedbackInputs() const {
  std::vector<size_t> out;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].errorFeedback())
      out.push_back(i);
  return out;
}

std::optional<size_t> Function::inputWithRole(const std::string &role) const {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].role == role)
      return i;
  return std::nullopt;
}

std::string inputLabel(const std::vector<Tensor> &inputs, size_t index) {
  std::string label = "arg" + std::to_string(index);
  if (index < inputs.size() && !inputs[index].name.empty())
    label += " (" + inputs[index].name + ")";
  return label;
}

int64_t Function::devices() const {
  int64_t n = 1;
  for (int64_t s : axisSizes)
    n *= s;
  return n;
}

int64_t Function::axisIndex(const std::string &axis) const {
  for (size_t i = 0; i < axisNames.size(); ++i)
    if (axisNames[i] == axis)
      return i;
  return -1;
}

int64_t Function::rank() const { return par_function_rank(fn); }

std::vector<int64_t> Function::coords(int64_t rank) const {
  std::vector<int64_t> c(axisSizes.size());
  par_function_coords(fn, rank, c.data());
  return c;
}

int64_t Function::rankOf(const std::vector<int64_t> &coords) const {
  return par_function_rank_of(fn, coords.data());
}

std::vector<Buffer>
Function::call(const std::vector<const Buffer *> &args) const {
  if (args.size() != inputs.size())
    fatal("'" + name + "' takes " + std::to_string(inputs.size()) +
          " arguments, not " + std::to_string(args.size()));
  std::vector<const void *> in;
  for (const Buffer *b : args)
    in.push_back(b->data());
  std::vector<Buffer> outs;
  std::vector<void *> out;
  for (const Tensor &t : outputs)
    outs.push_back(zeroBuffer(t.localBytes()));
  for (Buffer &b : outs)
    out.push_back(b.data());
  check(par_function_call(fn, in.data(), out.data()));
  return outs;
}

std::vector<Buffer> Function::call(const std::vector<Buffer> &args) const {
  std::vector<const Buffer *> ptrs;
  for (const Buffer &b : args)
    ptrs.push_back(&b);
  return call(ptrs);
}

std::optional<size_t> Function::donatedArg(size_t r) const {
  for (auto [res, arg] : donated)
    if (res == r)
      return arg;
  return std::nullopt;
}

int64_t Function::donatedResultBytes() const {
  int64_t bytes = 0;
  for (auto [r, a] : donated)
    bytes += outputs[r].localBytes();
  return bytes;
}

void Function::callBuffers(const std::vector<const SessionBuffer *> &args,
                           const std::vector<SessionBuffer *> &outs) const {
  if (args.size() != inputs.size() || outs.size() != outputs.size())
    fatal("'" + name + "' takes " + std::to_string(inputs.size()) +
          " arguments and " + std::to_string(outputs.size()) +
          " results, not " + std::to_string(args.size()) + " and " +
          std::to_string(outs.size()));
  std::vector<par_buffer_t *> in, out;
  for (const SessionBuffer *b : args)
    in.push_back(b->get());
  for (SessionBuffer *b : outs)
    out.push_back(b->get());
  check(par_function_call_buffers(fn, in.data(), out.data()));
}

std::vector<SessionBuffer>
Function::callBuffers(const std::vector<const SessionBuffer *> &args) const {
  if (args.size() != inputs.size())
    fatal("'" + name + "' takes " + std::to_string(inputs.size()) +
          " arguments, not " + std::to_string(args.size()));
  std::vector<par_buffer_t *> in, out(outputs.size(), nullptr);
  for (const SessionBuffer *b : args)
    in.push_back(b->get());
  check(par_function_call_new(fn, in.data(), out.data()));
  std::vector<SessionBuffer> outs;
  for (par_buffer_t *b : out)
    outs.emplace_back(session, b);
  return outs;
}

SessionBuffer Function::buffer(par_io_t io, size_t index) const {
  const Tensor &t = io == PAR_INPUT ? inputs[index] : outputs[index];
  return SessionBuffer(session, t.localBytes());
}

SessionBuffer Function::upload(par_io_t io, size_t index,
                               const Buffer &local) const {
  SessionBuffer b = buffer(io, index);
  b.upload(local.data(), b.bytes());
  return b;
}

std::string Function::target() const { return par_session_target(session); }

bool Function::onDevice() const { return par_session_on_device(session); }

Buffer Function::scatter(par_io_t io, size_t index,
                         const Buffer &global) const {
  const Tensor &t = io == PAR_INPUT ? inputs[index] : outputs[index];
  Buffer local = zeroBuffer(t.localBytes());
  check(par_function_scatter(fn, io, index, global.data(), local.data()));
  return local;
}

Buffer Function::gather(par_io_t io, size_t index, const void *local,
                        const int64_t *sourceCoords) const {
  const Tensor &t = io == PAR_INPUT ? inputs[index] : outputs[index];
  Buffer global = rank() == 0 ? zeroBuffer(t.globalBytes()) : Buffer();
  check(par_function_gather(fn, io, index, local,
                            global.empty() ? nullptr : global.data(),
                            sourceCoords));
  return global;
}

Session::Session(const std::string &artifact, par_program_t program,
                 par_rt_context_t *context, bool loadCode) {
  par_session_options_t options;
  par_session_options_initialize(&options);
  options.program = program;
  options.context = context;
  options.load_code = loadCode;
  if (par_session_create(artifact.c_str(), &options, &session) != PAR_OK)
    fatal(par_session_last_error(nullptr));
}

Session::~Session() { par_session_destroy(session); }

Function Session::lookup(const std::string &name) const {
  par_function_t *fn = nullptr;
  if (par_session_lookup_function(session, name.c_str(), &fn) != PAR_OK)
    fatal(par_session_last_error(session));
  return Function(session, fn);
}

par_pipeline_info_t Session::pipeline() const {
  par_pipeline_info_t info;
  if (par_session_pipeline(session, &info) != PAR_OK)
    fatal(par_session_last_error(session));
  return info;
}

std::string Session::manifestPath() const {
  return par_session_manifest_path(session);
}

std::string Session::target() const { return par_session_target(session); }

std::vector<std::string> Session::functionNames() const {
  std::vector<std::string> names;
  for (int64_t i = 0, e = par_session_function_count(session); i < e; ++i)
    names.push_back(par_session_function_name(session, i));
  return names;
}

} // namespace par::tooling


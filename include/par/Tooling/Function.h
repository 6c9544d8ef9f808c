//===- Function.h - C++ conveniences over the session API -------*- C++ -*-===//
//
// The tooling works on values: a Session owns a par_session_t, a Function
// copies what par_function_info/par_function_tensor say into vectors and
// strings (shapes, shardings as axis indices, feedback pairs, roles,
// gradient compression), and its
// call/scatter/gather take and return byte buffers. A SessionBuffer holds
// memory where the program runs (host memory for a CPU program, device
// memory for a GPU one: par_session_buffer_alloc), and callBuffers calls on
// such buffers, so state stays there across calls. Every session failure
// is fatal (Diagnostics.h) with the session's message.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TOOLING_FUNCTION_H
#define PAR_TOOLING_FUNCTION_H

#include "par/Manifest/Tensor.h"
#include "par/Runtime/par_session.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace par::tooling {

using Buffer = std::vector<char>;

/// A zero-filled buffer of `bytes` (at least one byte, so that data() is
/// never null).
Buffer zeroBuffer(int64_t bytes);

/// A session buffer (par_session_buffer_alloc): zero-filled memory where
/// the session's program runs, freed with the object. Move-only. data() is
/// a device pointer for a GPU program (for par_rt_* transfers only).
class SessionBuffer {
public:
  SessionBuffer() = default;
  SessionBuffer(par_session_t *session, int64_t bytes);
  /// Takes `buffer` (one of the session's, e.g. a par_function_call_new
  /// result) to free with the object.
  SessionBuffer(par_session_t *session, par_buffer_t *buffer);
  ~SessionBuffer();
  SessionBuffer(SessionBuffer &&o) noexcept { *this = std::move(o); }
  SessionBuffer &operator=(SessionBuffer &&o) noexcept;
  SessionBuffer(const SessionBuffer &) = delete;
  SessionBuffer &operator=(const SessionBuffer &) = delete;

  explicit operator bool() const { return buffer != nullptr; }
  int64_t bytes() const { return size; }
  par_buffer_t *get() const { return buffer; }
  void *data() const;
  /// Host -> buffer (`bytes` <= bytes()) and buffer -> host.
  void upload(const void *src, int64_t bytes);
  void upload(const Buffer &src) { upload(src.data(), size); }
  void download(void *dst, int64_t bytes) const;
  Buffer download() const;
  /// Element 0 as a double (one element copied out).
  double scalar(par_dtype_t dtype) const;
  /// Buffer -> buffer (the whole of this one), and zero-filling.
  void copyFrom(const SessionBuffer &src);
  void zero();

private:
  void check(par_status_t s) const;
  par_session_t *session = nullptr;
  par_buffer_t *buffer = nullptr;
  int64_t size = 0;
};

/// One input or output of a function: the manifest's description, as
/// the session's par_tensor_info_t hands it out.
using Tensor = manifest::Tensor;

/// How messages name input `index` of `f`: "argK", followed by
/// " (NAME)" when the input has a PyTorch name.
std::string inputLabel(const std::vector<Tensor> &inputs, size_t index);

/// Gradient compression of a train step or a stage update
/// (par-compress-gradients): per call and rank by the ring formulas, the
/// bytes its compressed exchanges send and those the fp32 ring all-reduce
/// of the same gradients would send.
struct Compression {
  std::string method; // "int8", "sign", "topk"
  double compressedBytes = 0, uncompressedBytes = 0;
};

class Function {
public:
  Function() = default;
  Function(par_session_t *session, par_function_t *fn);

  std::string name;
  std::vector<std::string> axisNames;
  std::vector<int64_t> axisSizes;
  std::vector<Tensor> inputs, outputs;
  /// (result, argument): after a train step the result feeds the argument.
  std::vector<std::pair<size_t, size_t>> feedback;
  /// (result, argument): the program writes the result into the
  /// argument's buffer; passing that buffer as the output too updates it in
  /// place (par-donate-buffers; par_function_info_t's `donated`).
  std::vector<std::pair<size_t, size_t>> donated;
  int64_t microBatches = 1;
  int64_t stage = -1;
  std::vector<int64_t> stageArgs;
  /// The linked functions by role ("" when absent): the gradient (a train
  /// step's: the one it calls), the train step, a stage's update, the
  /// logits function.
  std::string grad, step, update, logits;
  /// Mixed precision: "f16", "bf16" or "" (f32).
  std::string computeType;
  /// Loss scaling: the results with the next scale and the finite flag.
  int64_t lossScaleResult = -1, finiteResult = -1;
  double minLossScale = 0; // the policy's minimum scale (0: none given)
  /// Gradient compression, if the function compresses its gradients.
  std::optional<Compression> compression;

  /// The argument result `r` is donated to, if any.
  std::optional<size_t> donatedArg(size_t r) const;
  /// The bytes of the donated results (what a caller that does not donate
  /// holds on top of the memory plan's peak).
  int64_t donatedResultBytes() const;
  /// The inputs of role "error_feedback", in order.
  std::vector<size_t> errorFeedbackInputs() const;
  /// The first input of role `role` ("tokens", "targets"), if any.
  std::optional<size_t> inputWithRole(const std::string &role) const;

  int64_t devices() const;
  int64_t axisIndex(const std::string &axis) const;
  /// This process's rank, a rank's mesh coordinates, and back.
  int64_t rank() const;
  std::vector<int64_t> coords(int64_t rank) const;
  int64_t rankOf(const std::vector<int64_t> &coords) const;

  /// Calls the function on local blocks; returns the local results.
  std::vector<Buffer> call(const std::vector<const Buffer *> &args) const;
  std::vector<Buffer> call(const std::vector<Buffer> &args) const;
  /// Calls it on session buffers: the results go into `outs` (one per
  /// result, none of them an argument's but a donated argument's, which is
  /// then updated in place; par_function_call_buffers).
  void callBuffers(const std::vector<const SessionBuffer *> &args,
                   const std::vector<SessionBuffer *> &outs) const;
  /// The same into new buffers, returned (par_function_call_new: a CPU
  /// program's results as it allocated them, without a copy).
  std::vector<SessionBuffer>
  callBuffers(const std::vector<const SessionBuffer *> &args) const;
  /// A zero-filled session buffer of tensor (io, index)'s local size, and
  /// one holding the local block `local`.
  SessionBuffer buffer(par_io_t io, size_t index) const;
  SessionBuffer upload(par_io_t io, size_t index, const Buffer &local) const;
  /// The session's target ("cpu", "cuda:sm_90") and whether its buffers
  /// are device memory.
  /// The session's handle (for the session API's other queries).
  par_function_t *handle() const { return fn; }
  std::string target() const;
  bool onDevice() const;
  /// This rank's block of a global tensor (par_function_scatter).
  Buffer scatter(par_io_t io, size_t index, const Buffer &global) const;
  /// The global tensor on rank 0 (empty elsewhere; par_function_gather).
  Buffer gather(par_io_t io, size_t index, const void *local,
                const int64_t *sourceCoords = nullptr) const;

private:
  void check(par_status_t s) const;
  par_session_t *session = nullptr;
  par_function_t *fn = nullptr;
};

/// One program of an artifact directory.
class Session {
public:
  Session(const std::string &artifact, par_program_t program,
          par_rt_context_t *context, bool loadCode = true);
  ~Session();
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  /// The function `name` ("" for the first).
  Function lookup(const std::string &name) const;
  par_pipeline_info_t pipeline() const;
  std::string manifestPath() const;
  /// "cpu" or "cuda:<chip>" (par_session_target).
  std::string target() const;
  /// The manifest's functions, in order.
  std::vector<std::string> functionNames() const;

private:
  par_session_t *session = nullptr;
};

/// While alive, a CPU runtime context of this process alone (no MPI) is
/// the current one, when `needed`: the unsharded reference (a CPU program)
/// of a GPU run executes its kernels on the host, not on the GPU backend
/// of the job's context. The job's context is current again afterwards.
class HostContextScope {
public:
  explicit HostContextScope(bool needed);
  ~HostContextScope();
  HostContextScope(const HostContextScope &) = delete;
  HostContextScope &operator=(const HostContextScope &) = delete;

private:
  par_rt_context_t *ctx = nullptr;
};

} // namespace par::tooling

#endif // PAR_TOOLING_FUNCTION_H

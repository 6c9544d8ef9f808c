//===- MpiKernels.cpp - The CPU backend's collectives over MPI ------------===//
//
// Every collective maps to one MPI collective on the group's communicator,
// with host-side packing where the kernel ABI's block layout ([C][n][D],
// [A][n][B]) differs from MPI's (block j contiguous at offset j):
//
//   all_gather      MPI_Allgather into [n][C][D], unpack to [C][n][D]
//   reduce_scatter  pack [A][n][B] to [n][A][B], MPI_Reduce_scatter_block
//   all_to_all      pack, MPI_Alltoall, unpack
//
// When the outer extent (C or A) is 1 the layouts coincide and the packing is
// skipped. f16/bf16 reductions widen to f32, reduce, and round back (MPI has
// no 16-bit float type, and f32 sums are more accurate). i1 is one byte per
// element: sum and max are a logical or, min a logical and.
//
// MPI counts are `int`. Elementwise operations (all_reduce, broadcast,
// send/recv) are split into pieces below that limit; the block collectives
// refuse blocks of more than INT_MAX elements with an error instead.
//
//===----------------------------------------------------------------------===//

#include "Context.h"

#include "../common/Dtype.h"

#include <cblas.h>

#include <climits>
#include <cstring>

using namespace par::rt;

namespace {

/// Elements per MPI call when splitting elementwise operations.
constexpr int64_t kPiece = int64_t(1) << 30;

/// Messages a send/recv of `count` elements takes (at least one).
int64_t numPieces(int64_t count) {
  return count == 0 ? 1 : (count + kPiece - 1) / kPiece;
}

bool isHalf(int32_t dtype) { return dtype == PAR_F16 || dtype == PAR_BF16; }

/// The MPI type that moves `dtype` (no arithmetic needed).
MPI_Datatype moveType(int32_t dtype) {
  switch (dtype) {
  case PAR_F32: return MPI_FLOAT;
  case PAR_F64: return MPI_DOUBLE;
  case PAR_F16: case PAR_BF16: return MPI_UINT16_T;
  case PAR_I32: return MPI_INT32_T;
  case PAR_I64: return MPI_INT64_T;
  case PAR_I8: return MPI_INT8_T;
  default: return MPI_UNSIGNED_CHAR; // i1
  }
}

/// The MPI type a reduction of `dtype` runs in (16-bit floats widen).
MPI_Datatype reduceType(int32_t dtype) {
  return isHalf(dtype) ? MPI_FLOAT : moveType(dtype);
}

MPI_Op reduceOp(int32_t dtype, int32_t reduction) {
  if (dtype == PAR_I1)
    return reduction == PAR_MIN ? MPI_LAND : MPI_LOR;
  switch (reduction) {
  case PAR_MAX: return MPI_MAX;
  case PAR_MIN: return MPI_MIN;
  default: return MPI_SUM; // sum, and avg = sum then divide
  }
}

#define PAR_MPI_CHECK(ctx, call, expr)                                         \
  do {                                                                         \
    int rc_ = (expr);                                                          \
    if (rc_ != MPI_SUCCESS)                                                    \
      return mpiError(ctx, call, rc_);                                         \
  } while (0)

par_status_t checkBlock(par_rt_context_t &ctx, int64_t elements) {
  if (elements > INT_MAX)
    return setError(ctx, PAR_ERR_INVALID_ARGUMENT,
                    "a block of " + std::to_string(elements) +
                        " elements exceeds MPI's limit of 2^31-1");
  return PAR_OK;
}

bool overlaps(const void *a, size_t aBytes, const void *b, size_t bBytes) {
  auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return aBytes && bBytes && pa < pb + bBytes && pb < pa + aBytes;
}

/// [A][n][B] -> [n][A][B] (bytes per element `es`).
void packBlocks(const unsigned char *in, unsigned char *out, int64_t A,
                int64_t n, int64_t B, int64_t es) {
  size_t row = size_t(B * es);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t a = 0; a < A; ++a)
      std::memcpy(out + (j * A + a) * row, in + (a * n + j) * row, row);
}

/// [n][C][D] -> [C][n][D].
void unpackBlocks(const unsigned char *in, unsigned char *out, int64_t C,
                  int64_t n, int64_t D, int64_t es) {
  size_t row = size_t(D * es);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t c = 0; c < C; ++c)
      std::memcpy(out + (c * n + j) * row, in + (j * C + c) * row, row);
}

void widen(const void *in, float *out, int64_t count, int32_t dtype) {
  auto *p = static_cast<const uint16_t *>(in);
  if (dtype == PAR_BF16)
    for (int64_t i = 0; i < count; ++i)
      out[i] = bf16ToFloat(p[i]);
  else
    for (int64_t i = 0; i < count; ++i)
      out[i] = halfToFloat(p[i]);
}

void narrow(const float *in, void *out, int64_t count, int32_t dtype) {
  auto *p = static_cast<uint16_t *>(out);
  if (dtype == PAR_BF16)
    for (int64_t i = 0; i < count; ++i)
      p[i] = floatToBf16(in[i]);
  else
    for (int64_t i = 0; i < count; ++i)
      p[i] = floatToHalf(in[i]);
}

template <typename T> void divideAll(void *data, int64_t count, int64_t n) {
  auto *p = static_cast<T *>(data);
  for (int64_t i = 0; i < count; ++i)
    p[i] = T(p[i] / T(n));
}

/// avg = sum / n in the type the reduction ran in (f32 for f16/bf16;
/// integers truncate toward zero, as C division does).
void divideBy(void *data, int64_t count, MPI_Datatype type, int64_t n) {
  if (type == MPI_FLOAT) divideAll<float>(data, count, n);
  else if (type == MPI_DOUBLE) divideAll<double>(data, count, n);
  else if (type == MPI_INT32_T) divideAll<int32_t>(data, count, n);
  else if (type == MPI_INT64_T) divideAll<int64_t>(data, count, n);
  else if (type == MPI_INT8_T) divideAll<int8_t>(data, count, n);
}

int64_t typeSize(MPI_Datatype type) {
  int size = 0;
  MPI_Type_size(type, &size);
  return size;
}

/// MPI_Allreduce split into pieces of at most kPiece elements.
par_status_t allreducePieces(par_rt_context_t &ctx, const void *in, void *out,
                             int64_t count, MPI_Datatype type, MPI_Op op,
                             MPI_Comm comm) {
  int64_t es = typeSize(type);
  for (int64_t off = 0; off < count; off += kPiece) {
    int piece = int(std::min(kPiece, count - off));
    const void *src = in == MPI_IN_PLACE
                          ? MPI_IN_PLACE
                          : static_cast<const unsigned char *>(in) + off * es;
    PAR_MPI_CHECK(ctx, "MPI_Allreduce",
                  MPI_Allreduce(src, static_cast<unsigned char *>(out) + off * es,
                                piece, type, op, comm));
  }
  return PAR_OK;
}

} // namespace

par_status_t par::rt::bcastBytes(par_rt_context_t &ctx, void *buffer,
                                 int64_t bytes, int root, MPI_Comm comm) {
  for (int64_t off = 0; off < bytes; off += kPiece)
    PAR_MPI_CHECK(ctx, "MPI_Bcast",
                  MPI_Bcast(static_cast<unsigned char *>(buffer) + off,
                            int(std::min(kPiece, bytes - off)), MPI_BYTE, root,
                            comm));
  return PAR_OK;
}

par_status_t par::rt::cpuAllReduce(par_rt_context_t &ctx, Group &g,
                                   const void *in, void *out, int64_t count,
                                   int32_t dtype, int32_t reduction) {
  MPI_Comm comm;
  if (par_status_t st = groupComm(ctx, g, comm))
    return st;
  MPI_Datatype type = reduceType(dtype);
  MPI_Op op = reduceOp(dtype, reduction);
  if (isHalf(dtype)) {
    float *wide = reinterpret_cast<float *>(scratch(ctx, 0, count * 4));
    widen(in, wide, count, dtype);
    if (par_status_t st =
            allreducePieces(ctx, MPI_IN_PLACE, wide, count, type, op, comm))
      return st;
    if (reduction == PAR_AVG)
      divideBy(wide, count, type, g.size);
    narrow(wide, out, count, dtype);
    return PAR_OK;
  }
  const void *src = in == out ? MPI_IN_PLACE : in;
  if (par_status_t st = allreducePieces(ctx, src, out, count, type, op, comm))
    return st;
  if (reduction == PAR_AVG)
    divideBy(out, count, type, g.size);
  return PAR_OK;
}

par_status_t par::rt::cpuAllGather(par_rt_context_t &ctx, Group &g,
                                   const void *in, void *out, int64_t C,
                                   int64_t D, int32_t dtype) {
  int64_t n = g.size, es = dtypeSize(dtype), block = C * D;
  if (par_status_t st = checkBlock(ctx, block))
    return st;
  MPI_Comm comm;
  if (par_status_t st = groupComm(ctx, g, comm))
    return st;
  MPI_Datatype type = moveType(dtype);
  size_t outBytes = size_t(n * block * es);
  // With C == 1 the output is already [n][D]: gather straight into it
  // (unless the input lives inside the output, which MPI forbids).
  if (C == 1 && !overlaps(in, size_t(block * es), out, outBytes)) {
    PAR_MPI_CHECK(ctx, "MPI_Allgather",
                  MPI_Allgather(in, int(block), type, out, int(block), type,
                                comm));
    return PAR_OK;
  }
  unsigned char *tmp = scratch(ctx, 0, outBytes);
  PAR_MPI_CHECK(ctx, "MPI_Allgather",
                MPI_Allgather(in, int(block), type, tmp, int(block), type,
                              comm));
  unpackBlocks(tmp, static_cast<unsigned char *>(out), C, n, D, es);
  return PAR_OK;
}

par_status_t par::rt::cpuReduceScatter(par_rt_context_t &ctx, Group &g,
                                       const void *in, void *out, int64_t A,
                                       int64_t B, int32_t dtype,
                                       int32_t reduction) {
  int64_t n = g.size, es = dtypeSize(dtype), block = A * B;
  if (par_status_t st = checkBlock(ctx, block))
    return st;
  MPI_Comm comm;
  if (par_status_t st = groupComm(ctx, g, comm))
    return st;
  MPI_Datatype type = reduceType(dtype);
  MPI_Op op = reduceOp(dtype, reduction);
  size_t inBytes = size_t(n * block * es);

  // The send buffer must be [n][A][B] in the reduction's type.
  const void *send = in;
  if (isHalf(dtype)) {
    const void *packed = in;
    if (A != 1) {
      unsigned char *p = scratch(ctx, 0, inBytes);
      packBlocks(static_cast<const unsigned char *>(in), p, A, n, B, es);
      packed = p;
    }
    float *wide = reinterpret_cast<float *>(scratch(ctx, 1, n * block * 4));
    widen(packed, wide, n * block, dtype);
    float *result = reinterpret_cast<float *>(scratch(ctx, 2, block * 4));
    PAR_MPI_CHECK(ctx, "MPI_Reduce_scatter_block",
                  MPI_Reduce_scatter_block(wide, result, int(block), type, op,
                                           comm));
    if (reduction == PAR_AVG)
      divideBy(result, block, type, n);
    narrow(result, out, block, dtype);
    return PAR_OK;
  }
  if (A != 1 || overlaps(in, inBytes, out, size_t(block * es))) {
    unsigned char *p = scratch(ctx, 0, inBytes);
    packBlocks(static_cast<const unsigned char *>(in), p, A, n, B, es);
    send = p;
  }
  PAR_MPI_CHECK(ctx, "MPI_Reduce_scatter_block",
                MPI_Reduce_scatter_block(send, out, int(block), type, op,
                                         comm));
  if (reduction == PAR_AVG)
    divideBy(out, block, type, n);
  return PAR_OK;
}

par_status_t par::rt::cpuAllToAll(par_rt_context_t &ctx, Group &g,
                                  const void *in, void *out, int64_t A,
                                  int64_t B, int64_t C, int64_t D,
                                  int32_t dtype) {
  int64_t n = g.size, es = dtypeSize(dtype), block = A * B; // == C * D
  if (par_status_t st = checkBlock(ctx, block))
    return st;
  MPI_Comm comm;
  if (par_status_t st = groupComm(ctx, g, comm))
    return st;
  MPI_Datatype type = moveType(dtype);
  size_t bytes = size_t(n * block * es);
  bool alias = overlaps(in, bytes, out, bytes);
  const void *send = in;
  if (A != 1 || alias) {
    unsigned char *p = scratch(ctx, 0, bytes);
    packBlocks(static_cast<const unsigned char *>(in), p, A, n, B, es);
    send = p;
  }
  void *recv = C == 1 ? out : scratch(ctx, 1, bytes);
  PAR_MPI_CHECK(ctx, "MPI_Alltoall",
                MPI_Alltoall(send, int(block), type, recv, int(block), type,
                             comm));
  if (C != 1)
    unpackBlocks(static_cast<unsigned char *>(recv),
                 static_cast<unsigned char *>(out), C, n, D, es);
  return PAR_OK;
}

par_status_t par::rt::cpuAllSlice(par_rt_context_t &ctx, Group &g,
                                  const void *in, void *out, int64_t A,
                                  int64_t B, int32_t dtype) {
  (void)ctx;
  int64_t n = g.size, es = dtypeSize(dtype);
  size_t row = size_t(B * es);
  auto *src = static_cast<const unsigned char *>(in);
  auto *dst = static_cast<unsigned char *>(out);
  // memmove: slicing in place (out == in) moves rows towards the front.
  for (int64_t a = 0; a < A; ++a)
    std::memmove(dst + a * row, src + (a * n + g.index) * row, row);
  return PAR_OK;
}

par_status_t par::rt::cpuBroadcast(par_rt_context_t &ctx, Group &g,
                                   const void *in, void *out, int64_t count,
                                   int32_t dtype, int64_t root) {
  MPI_Comm comm;
  if (par_status_t st = groupComm(ctx, g, comm))
    return st;
  int64_t bytes = count * dtypeSize(dtype);
  if (g.index == root && in != out)
    std::memmove(out, in, size_t(bytes));
  return bcastBytes(ctx, out, bytes, int(root), comm);
}

/// cpuSend's pieces, each sent at once or, with `requests`, started.
static par_status_t sendPieces(par_rt_context_t &ctx, const void *in,
                               int64_t count, int32_t dtype, int64_t peer,
                               int64_t tag,
                               std::vector<MPI_Request> *requests) {
  MPI_Datatype type = moveType(dtype);
  int64_t es = dtypeSize(dtype);
  // Messages between a pair with the same tag never overtake each other,
  // so the receiver reassembles the pieces in order (started or not). An
  // empty message is still one message: the receiver waits for it.
  for (int64_t off = 0, pieces = numPieces(count); pieces--; off += kPiece) {
    int piece = int(std::min(kPiece, count - off));
    const unsigned char *at = static_cast<const unsigned char *>(in) + off * es;
    if (!requests) {
      PAR_MPI_CHECK(ctx, "MPI_Send",
                    MPI_Send(at, piece, type, int(peer), int(tag), ctx.peers));
      continue;
    }
    MPI_Request req;
    PAR_MPI_CHECK(ctx, "MPI_Isend",
                  MPI_Isend(at, piece, type, int(peer), int(tag), ctx.peers,
                            &req));
    requests->push_back(req);
  }
  return PAR_OK;
}

par_status_t par::rt::cpuSend(par_rt_context_t &ctx, const void *in,
                              int64_t count, int32_t dtype, int64_t peer,
                              int64_t tag) {
  return sendPieces(ctx, in, count, dtype, peer, tag, nullptr);
}

par_status_t par::rt::cpuSendAsync(par_rt_context_t &ctx, const void *in,
                                   int64_t count, int32_t dtype, int64_t peer,
                                   int64_t tag) {
  return sendPieces(ctx, in, count, dtype, peer, tag, &ctx.pendingSends);
}

par_status_t par::rt::cpuRecv(par_rt_context_t &ctx, void *out, int64_t count,
                              int32_t dtype, int64_t peer, int64_t tag) {
  MPI_Datatype type = moveType(dtype);
  int64_t es = dtypeSize(dtype);
  for (int64_t off = 0, pieces = numPieces(count); pieces--; off += kPiece) {
    int piece = int(std::min(kPiece, count - off));
    MPI_Status status;
    PAR_MPI_CHECK(ctx, "MPI_Recv",
                  MPI_Recv(static_cast<unsigned char *>(out) + off * es, piece,
                           type, int(peer), int(tag), ctx.peers, &status));
    // A longer message fails above (MPI_ERR_TRUNCATE); a shorter one would
    // silently leave stale data, so it is an error too.
    int got = 0;
    MPI_Get_count(&status, type, &got);
    if (got != piece)
      return setError(ctx, PAR_ERR_COMMUNICATION,
                      "received " + std::to_string(got) +
                          " elements from rank " + std::to_string(peer) +
                          ", expected " + std::to_string(piece));
  }
  return PAR_OK;
}

par_status_t par::rt::cpuMatmul(par_rt_context_t &ctx, const void *a,
                                const void *b, void *c, int64_t M, int64_t N,
                                int64_t K, int32_t dtype, bool accumulate) {
  if (M == 0 || N == 0)
    return PAR_OK;
  if ((dtype == PAR_F32 || dtype == PAR_F64) &&
      (M > INT_MAX || N > INT_MAX || K > INT_MAX))
    return setError(ctx, PAR_ERR_INVALID_ARGUMENT,
                    "matmul dimensions exceed BLAS's 32-bit int");
  // Leading dimensions must be >= 1 even for empty matrices (K == 0).
  int lda = int(std::max<int64_t>(K, 1)), ldb = int(N), ldc = int(N);
  if (dtype == PAR_F32) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(M), int(N),
                int(K), 1.0f, static_cast<const float *>(a), lda,
                static_cast<const float *>(b), ldb, accumulate ? 1.0f : 0.0f,
                static_cast<float *>(c), ldc);
    return PAR_OK;
  }
  if (dtype == PAR_F64) {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(M), int(N),
                int(K), 1.0, static_cast<const double *>(a), lda,
                static_cast<const double *>(b), ldb, accumulate ? 1.0 : 0.0,
                static_cast<double *>(c), ldc);
    return PAR_OK;
  }
  hostMatmul(a, b, c, M, N, K, dtype, accumulate);
  return PAR_OK;
}

par_status_t par::rt::cpuBatchMatmul(par_rt_context_t &ctx, const void *a,
                                     const void *b, void *c, int64_t batch,
                                     int64_t M, int64_t N, int64_t K,
                                     bool transA, bool transB, int32_t dtype,
                                     bool accumulate) {
  if (M > INT_MAX || N > INT_MAX || K > INT_MAX)
    return setError(ctx, PAR_ERR_INVALID_ARGUMENT,
                    "matmul dimensions exceed BLAS's 32-bit int");
  if (M == 0 || N == 0)
    return PAR_OK;
  // Leading dimensions of the stored (row-major) matrices.
  int lda = int(std::max<int64_t>(transA ? M : K, 1));
  int ldb = int(std::max<int64_t>(transB ? K : N, 1));
  int ldc = int(N);
  CBLAS_TRANSPOSE ta = transA ? CblasTrans : CblasNoTrans;
  CBLAS_TRANSPOSE tb = transB ? CblasTrans : CblasNoTrans;
  for (int64_t i = 0; i < batch; ++i) {
    if (dtype == PAR_F32) {
      const float *ai = static_cast<const float *>(a) + i * M * K;
      const float *bi = static_cast<const float *>(b) + i * K * N;
      float *ci = static_cast<float *>(c) + i * M * N;
      cblas_sgemm(CblasRowMajor, ta, tb, int(M), int(N), int(K), 1.0f, ai,
                  lda, bi, ldb, accumulate ? 1.0f : 0.0f, ci, ldc);
    } else {
      const double *ai = static_cast<const double *>(a) + i * M * K;
      const double *bi = static_cast<const double *>(b) + i * K * N;
      double *ci = static_cast<double *>(c) + i * M * N;
      cblas_dgemm(CblasRowMajor, ta, tb, int(M), int(N), int(K), 1.0, ai,
                  lda, bi, ldb, accumulate ? 1.0 : 0.0, ci, ldc);
    }
  }
  return PAR_OK;
}

//===- MpiCollectives.cpp - The MPI backend's collectives -----------------===//
//
// Every collective maps to one MPI collective on the group's communicator,
// with host-side packing where the kernel ABI's block layout ([C][n][D],
// [A][n][B]) differs from MPI's (block j contiguous at offset j):
//
//   all_gather      MPI_Allgather into [n][C][D], unpack to [C][n][D]
//   reduce_scatter  pack [A][n][B] to [n][A][B], MPI_Reduce_scatter_block
//   all_to_all      pack, MPI_Alltoall, unpack
//   bucket          pack the members into one buffer, MPI_Iallreduce in
//                   place, MPI_Wait, unpack (one member: no staging)
//   gather start    MPI_Iallgather into [n][C][D] (C == 1: the output),
//                   MPI_Wait, unpack to [C][n][D]
//
// When the outer extent (C or A) is 1 the layouts coincide and the packing is
// skipped. f16/bf16 reductions widen to f32, reduce, and round back (MPI has
// no 16-bit float type, and f32 sums are more accurate). i1 is one byte per
// element: sum and max are a logical or, min a logical and.
//
// MPI counts are `int`. Elementwise operations (all_reduce, broadcast) are
// split into pieces below that limit; the block collectives refuse blocks of
// more than INT_MAX elements with an error instead.
//
//===----------------------------------------------------------------------===//

#include "MpiState.h"

#include "../../common/Dtype.h"

#include <algorithm>
#include <climits>
#include <cstring>

using namespace par::rt;
using namespace par::rt::mpi;

namespace {

bool isHalf(int32_t dtype) { return dtype == PAR_F16 || dtype == PAR_BF16; }

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

par_status_t checkBlock(State &s, int64_t elements) {
  if (elements > INT_MAX)
    return fail(s, PAR_ERR_INVALID_ARGUMENT,
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
par_status_t allreducePieces(State &s, const void *in, void *out,
                             int64_t count, MPI_Datatype type, MPI_Op op,
                             MPI_Comm comm) {
  int64_t es = typeSize(type);
  for (int64_t off = 0; off < count; off += kPiece) {
    int piece = int(std::min(kPiece, count - off));
    const void *src = in == MPI_IN_PLACE
                          ? MPI_IN_PLACE
                          : static_cast<const unsigned char *>(in) + off * es;
    PAR_MPI_CHECK(s, "MPI_Allreduce",
                  MPI_Allreduce(src, static_cast<unsigned char *>(out) + off * es,
                                piece, type, op, comm));
  }
  return PAR_OK;
}

} // namespace

MPI_Datatype par::rt::mpi::moveType(int32_t dtype) {
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

par_status_t par::rt::mpi::bcastBytes(State &s, void *buffer, int64_t bytes,
                                      int root, MPI_Comm comm) {
  for (int64_t off = 0; off < bytes; off += kPiece)
    PAR_MPI_CHECK(s, "MPI_Bcast",
                  MPI_Bcast(static_cast<unsigned char *>(buffer) + off,
                            int(std::min(kPiece, bytes - off)), MPI_BYTE, root,
                            comm));
  return PAR_OK;
}

par_status_t par::rt::mpi::allReduce(State &s, const par_rt_backend_group_t *g,
                                     MPI_Comm comm, const void *in, void *out,
                                     int64_t count, int32_t dtype,
                                     int32_t reduction) {
  MPI_Datatype type = reduceType(dtype);
  MPI_Op op = reduceOp(dtype, reduction);
  if (isHalf(dtype)) {
    float *wide = reinterpret_cast<float *>(scratch(s, 0, count * 4));
    widen(in, wide, count, dtype);
    if (par_status_t st =
            allreducePieces(s, MPI_IN_PLACE, wide, count, type, op, comm))
      return st;
    if (reduction == PAR_AVG)
      divideBy(wide, count, type, g->size);
    narrow(wide, out, count, dtype);
    return PAR_OK;
  }
  const void *src = in == out ? MPI_IN_PLACE : in;
  if (par_status_t st = allreducePieces(s, src, out, count, type, op, comm))
    return st;
  if (reduction == PAR_AVG)
    divideBy(out, count, type, g->size);
  return PAR_OK;
}

par_status_t par::rt::mpi::allGather(State &s, const par_rt_backend_group_t *g,
                                     MPI_Comm comm, const void *in, void *out,
                                     int64_t C, int64_t D, int32_t dtype) {
  int64_t n = g->size, es = dtypeSize(dtype), block = C * D;
  if (par_status_t st = checkBlock(s, block))
    return st;
  MPI_Datatype type = moveType(dtype);
  size_t outBytes = size_t(n * block * es);
  // With C == 1 the output is already [n][D]: gather straight into it
  // (unless the input lives inside the output, which MPI forbids).
  if (C == 1 && !overlaps(in, size_t(block * es), out, outBytes)) {
    PAR_MPI_CHECK(s, "MPI_Allgather",
                  MPI_Allgather(in, int(block), type, out, int(block), type,
                                comm));
    return PAR_OK;
  }
  unsigned char *tmp = scratch(s, 0, outBytes);
  PAR_MPI_CHECK(s, "MPI_Allgather",
                MPI_Allgather(in, int(block), type, tmp, int(block), type,
                              comm));
  unpackBlocks(tmp, static_cast<unsigned char *>(out), C, n, D, es);
  return PAR_OK;
}

par_status_t par::rt::mpi::reduceScatter(State &s,
                                         const par_rt_backend_group_t *g,
                                         MPI_Comm comm, const void *in,
                                         void *out, int64_t A, int64_t B,
                                         int32_t dtype, int32_t reduction) {
  int64_t n = g->size, es = dtypeSize(dtype), block = A * B;
  if (par_status_t st = checkBlock(s, block))
    return st;
  MPI_Datatype type = reduceType(dtype);
  MPI_Op op = reduceOp(dtype, reduction);
  size_t inBytes = size_t(n * block * es);

  // The send buffer must be [n][A][B] in the reduction's type.
  const void *send = in;
  if (isHalf(dtype)) {
    const void *packed = in;
    if (A != 1) {
      unsigned char *p = scratch(s, 0, inBytes);
      packBlocks(static_cast<const unsigned char *>(in), p, A, n, B, es);
      packed = p;
    }
    float *wide = reinterpret_cast<float *>(scratch(s, 1, n * block * 4));
    widen(packed, wide, n * block, dtype);
    float *result = reinterpret_cast<float *>(scratch(s, 2, block * 4));
    PAR_MPI_CHECK(s, "MPI_Reduce_scatter_block",
                  MPI_Reduce_scatter_block(wide, result, int(block), type, op,
                                           comm));
    if (reduction == PAR_AVG)
      divideBy(result, block, type, n);
    narrow(result, out, block, dtype);
    return PAR_OK;
  }
  if (A != 1 || overlaps(in, inBytes, out, size_t(block * es))) {
    unsigned char *p = scratch(s, 0, inBytes);
    packBlocks(static_cast<const unsigned char *>(in), p, A, n, B, es);
    send = p;
  }
  PAR_MPI_CHECK(s, "MPI_Reduce_scatter_block",
                MPI_Reduce_scatter_block(send, out, int(block), type, op,
                                         comm));
  if (reduction == PAR_AVG)
    divideBy(out, block, type, n);
  return PAR_OK;
}

par_status_t par::rt::mpi::allToAll(State &s, const par_rt_backend_group_t *g,
                                    MPI_Comm comm, const void *in, void *out,
                                    int64_t A, int64_t B, int64_t C, int64_t D,
                                    int32_t dtype) {
  int64_t n = g->size, es = dtypeSize(dtype), block = A * B; // == C * D
  if (par_status_t st = checkBlock(s, block))
    return st;
  MPI_Datatype type = moveType(dtype);
  size_t bytes = size_t(n * block * es);
  bool alias = overlaps(in, bytes, out, bytes);
  const void *send = in;
  if (A != 1 || alias) {
    unsigned char *p = scratch(s, 0, bytes);
    packBlocks(static_cast<const unsigned char *>(in), p, A, n, B, es);
    send = p;
  }
  void *recv = C == 1 ? out : scratch(s, 1, bytes);
  PAR_MPI_CHECK(s, "MPI_Alltoall",
                MPI_Alltoall(send, int(block), type, recv, int(block), type,
                             comm));
  if (C != 1)
    unpackBlocks(static_cast<unsigned char *>(recv),
                 static_cast<unsigned char *>(out), C, n, D, es);
  return PAR_OK;
}

par_status_t par::rt::mpi::broadcast(State &s, const par_rt_backend_group_t *g,
                                     MPI_Comm comm, const void *in, void *out,
                                     int64_t count, int32_t dtype,
                                     int64_t root) {
  int64_t bytes = count * dtypeSize(dtype);
  if (g->index == root && in != out)
    std::memmove(out, in, size_t(bytes));
  return bcastBytes(s, out, bytes, int(root), comm);
}

//===----------------------------------------------------------------------===//
// Bucket all-reduces
//===----------------------------------------------------------------------===//

namespace {

/// A started bucket: its members, the buffer the reduction runs on (the
/// staging buffer, or a lone member's output) and MPI's requests (one per
/// piece of kPiece elements). Or a started all-gather (`gather`): one
/// request, its blocks staged as [n][C][D] when C > 1, unpacked by the wait
/// into `gatherOut`.
struct BucketRequest {
  bool gather = false;
  int64_t C = 1, D = 0;
  void *gatherOut = nullptr;
  std::vector<par_rt_bucket_member_t> members;
  int32_t dtype = 0, reduction = 0;
  int64_t groupSize = 1, total = 0;
  MPI_Datatype type = MPI_BYTE;
  std::vector<unsigned char> staging; // empty: reduced in the output
  void *data = nullptr;
  std::vector<MPI_Request> requests;
  // A started receive: each piece's expected count and, once a progress
  // call completed them (done), their statuses.
  bool recv = false, done = false;
  int64_t peer = -1;
  std::vector<int> expect;
  std::vector<MPI_Status> statuses;
};

/// A started receive's pieces came whole (a longer one fails in MPI with
/// MPI_ERR_TRUNCATE; a shorter one would leave stale data).
par_status_t checkReceived(State &s, const BucketRequest &r) {
  for (size_t i = 0; i < r.expect.size(); ++i) {
    int got = 0;
    MPI_Get_count(const_cast<MPI_Status *>(&r.statuses[i]), r.type, &got);
    if (got != r.expect[i])
      return fail(s, PAR_ERR_COMMUNICATION,
                  "received " + std::to_string(got) + " elements from rank " +
                      std::to_string(r.peer) + ", expected " +
                      std::to_string(r.expect[i]));
  }
  return PAR_OK;
}

} // namespace

par_status_t par::rt::mpi::bucketStart(State &s,
                                       const par_rt_backend_group_t *g,
                                       MPI_Comm comm,
                                       const par_rt_bucket_member_t *members,
                                       int64_t n, int32_t dtype,
                                       int32_t reduction, void **request) {
  *request = nullptr;
  auto *r = new BucketRequest;
  r->members.assign(members, members + n);
  r->dtype = dtype;
  r->reduction = reduction;
  r->groupSize = g->size;
  r->type = reduceType(dtype);
  for (const par_rt_bucket_member_t &m : r->members)
    r->total += m.count;
  int64_t es = dtypeSize(dtype), wide = typeSize(r->type);
  const void *src = MPI_IN_PLACE;
  if (n == 1 && !isHalf(dtype)) {
    // One member: reduced straight into its output.
    const par_rt_bucket_member_t &m = r->members.front();
    if (m.in != m.out)
      src = m.in;
    r->data = m.out;
  } else {
    // Packed in member order; 16-bit floats widened to f32 on the way.
    r->staging.resize(size_t(r->total * wide));
    unsigned char *at = r->staging.data();
    for (const par_rt_bucket_member_t &m : r->members) {
      if (isHalf(dtype))
        widen(m.in, reinterpret_cast<float *>(at), m.count, dtype);
      else if (m.count)
        std::memcpy(at, m.in, size_t(m.count * es));
      at += m.count * wide;
    }
    r->data = r->staging.data();
  }
  MPI_Op op = reduceOp(dtype, reduction);
  for (int64_t off = 0; off < r->total; off += kPiece) {
    int piece = int(std::min(kPiece, r->total - off));
    const void *from =
        src == MPI_IN_PLACE
            ? MPI_IN_PLACE
            : static_cast<const unsigned char *>(src) + off * wide;
    MPI_Request req;
    int rc = MPI_Iallreduce(from, static_cast<unsigned char *>(r->data) +
                                      off * wide,
                            piece, r->type, op, comm, &req);
    if (rc != MPI_SUCCESS) {
      // Pieces already started must finish before their buffer goes.
      MPI_Waitall(int(r->requests.size()), r->requests.data(),
                  MPI_STATUSES_IGNORE);
      delete r;
      return mpiError(s, "MPI_Iallreduce", rc);
    }
    r->requests.push_back(req);
  }
  s.pendingBuckets.insert(r);
  *request = r;
  return PAR_OK;
}

par_status_t par::rt::mpi::gatherStart(State &s,
                                       const par_rt_backend_group_t *g,
                                       MPI_Comm comm, const void *in,
                                       void *out, int64_t C, int64_t D,
                                       int32_t dtype, void **request) {
  *request = nullptr;
  int64_t n = g->size, es = dtypeSize(dtype), block = C * D;
  if (par_status_t st = checkBlock(s, block))
    return st;
  auto *r = new BucketRequest;
  r->gather = true;
  r->C = C;
  r->D = D;
  r->dtype = dtype;
  r->groupSize = n;
  r->gatherOut = out;
  size_t outBytes = size_t(n * block * es);
  // As the blocking form: straight into the output when it already is
  // [n][D] and does not hold the input (MPI forbids the overlap).
  void *dest = out;
  if (C != 1 || overlaps(in, size_t(block * es), out, outBytes)) {
    r->staging.resize(std::max<size_t>(outBytes, 1));
    dest = r->staging.data();
  }
  MPI_Datatype type = moveType(dtype);
  MPI_Request req;
  int rc = MPI_Iallgather(in, int(block), type, dest, int(block), type, comm,
                          &req);
  if (rc != MPI_SUCCESS) {
    delete r;
    return mpiError(s, "MPI_Iallgather", rc);
  }
  r->requests.push_back(req);
  s.pendingBuckets.insert(r);
  *request = r;
  return PAR_OK;
}

par_status_t par::rt::mpi::recvStart(void *state, void *out, int64_t count,
                                     int32_t dtype, int64_t peer, int64_t tag,
                                     void **request) {
  State &s = st(state);
  *request = nullptr;
  auto *r = new BucketRequest;
  r->recv = true;
  r->peer = peer;
  r->type = moveType(dtype);
  int64_t es = dtypeSize(dtype);
  int64_t pieces = count == 0 ? 1 : (count + kPiece - 1) / kPiece;
  for (int64_t off = 0; pieces--; off += kPiece) {
    int piece = int(std::min(kPiece, count - off));
    MPI_Request req;
    int rc = MPI_Irecv(static_cast<unsigned char *>(out) + off * es, piece,
                       r->type, int(peer), int(tag), s.peers, &req);
    if (rc != MPI_SUCCESS) {
      // The pieces already posted complete into `out`, which the caller
      // keeps until the job ends (the failure ends it).
      delete r;
      return mpiError(s, "MPI_Irecv", rc);
    }
    r->requests.push_back(req);
    r->expect.push_back(piece);
  }
  r->statuses.resize(r->requests.size());
  s.pendingBuckets.insert(r);
  *request = r;
  return PAR_OK;
}

par_status_t par::rt::mpi::bucketWait(void *state, void *request) {
  State &s = st(state);
  auto *r = static_cast<BucketRequest *>(request);
  s.pendingBuckets.erase(r);
  if (r->recv) {
    int rc = r->done ? MPI_SUCCESS
                     : MPI_Waitall(int(r->requests.size()),
                                   r->requests.data(), r->statuses.data());
    par_status_t st = rc == MPI_SUCCESS ? checkReceived(s, *r)
                                        : mpiError(s, "MPI_Waitall", rc);
    delete r;
    return st;
  }
  int rc = MPI_Waitall(int(r->requests.size()), r->requests.data(),
                       MPI_STATUSES_IGNORE);
  if (rc != MPI_SUCCESS) {
    delete r;
    return mpiError(s, "MPI_Waitall", rc);
  }
  if (r->gather) {
    // The gathered blocks to the kernel ABI's layout.
    if (!r->staging.empty())
      unpackBlocks(r->staging.data(),
                   static_cast<unsigned char *>(r->gatherOut), r->C,
                   r->groupSize, r->D, dtypeSize(r->dtype));
    delete r;
    return PAR_OK;
  }
  if (r->reduction == PAR_AVG)
    divideBy(r->data, r->total, r->type, r->groupSize);
  if (!r->staging.empty()) {
    int64_t es = dtypeSize(r->dtype), wide = typeSize(r->type);
    const unsigned char *at = r->staging.data();
    for (const par_rt_bucket_member_t &m : r->members) {
      if (isHalf(r->dtype))
        narrow(reinterpret_cast<const float *>(at), m.out, m.count, r->dtype);
      else if (m.count)
        std::memcpy(m.out, at, size_t(m.count * es));
      at += m.count * wide;
    }
  }
  delete r;
  return PAR_OK;
}

par_status_t par::rt::mpi::bucketProgress(void *state) {
  State &s = st(state);
  for (void *p : s.pendingBuckets) {
    auto *r = static_cast<BucketRequest *>(p);
    if (r->done)
      continue;
    int done = 0;
    PAR_MPI_CHECK(s, "MPI_Testall",
                  MPI_Testall(int(r->requests.size()), r->requests.data(),
                              &done,
                              r->recv ? r->statuses.data()
                                      : MPI_STATUSES_IGNORE));
    // A receive's statuses are kept for its wait (its requests are now
    // MPI_REQUEST_NULL, whose statuses would read empty).
    if (r->recv && done)
      r->done = true;
  }
  return PAR_OK;
}

void par::rt::mpi::waitAllBuckets(State &s) {
  // Only the transfers: a program that never waited may have freed the
  // outputs already.
  for (void *p : s.pendingBuckets) {
    auto *r = static_cast<BucketRequest *>(p);
    MPI_Waitall(int(r->requests.size()), r->requests.data(),
                MPI_STATUSES_IGNORE);
    delete r;
  }
  s.pendingBuckets.clear();
}

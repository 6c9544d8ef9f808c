//===- Mesh.cpp - The mesh, axes codes, groups and peers ------------------===//
//
// Pure arithmetic on the mesh, shared by every backend: a process's
// coordinates (row-major, last axis fastest), the group an axes code denotes
// (size, index in listed order, color over the unlisted axes), and the world
// rank send/recv address. Backends only see the result
// (par_rt_backend_group_t, world ranks), so the group semantics cannot differ
// between MPI, CUDA and local runs.
//
//===----------------------------------------------------------------------===//

#include "Context.h"
#include "Watchdog.h"

#include <algorithm>
#include <cstdio>

using namespace par::rt;

namespace {

/// Drops the groups of the old mesh and the device backend's communicators.
void resetGroups(par_rt_context_t &ctx) {
  ctx.groups.clear();
  ctx.device.ops->reset_groups(ctx.device.state);
}

int64_t linearRank(const par_rt_context_t &ctx,
                   const std::vector<int64_t> &coords) {
  int64_t r = 0;
  for (size_t a = 0; a < coords.size(); ++a)
    r = r * ctx.meshSizes[a] + coords[a];
  return r;
}

/// Checks the sizes of a mesh and computes its device count, or returns the
/// reason it is invalid.
std::string checkMeshSizes(int64_t numAxes, const int64_t *sizes,
                           int64_t &devices) {
  // An axes code stores axis + 1 in a byte.
  if (numAxes < 0 || numAxes > 255)
    return "a mesh has 0 to 255 axes, got " + std::to_string(numAxes);
  if (numAxes > 0 && !sizes)
    return "sizes is NULL";
  devices = 1;
  for (int64_t a = 0; a < numAxes; ++a) {
    if (sizes[a] < 1)
      return "mesh axis " + std::to_string(a) + " has size " +
             std::to_string(sizes[a]) + "; sizes must be >= 1";
    if (__builtin_mul_overflow(devices, sizes[a], &devices))
      return "the mesh's device count overflows int64";
  }
  return {};
}

} // namespace

std::string par::rt::decodeAxes(const par_rt_context_t &ctx, int64_t code,
                                std::vector<int> &axes) {
  auto bits = static_cast<uint64_t>(code);
  int numAxes = int(ctx.meshSizes.size());
  axes.clear();
  for (int k = 0; k < 8; ++k) {
    unsigned byte = (bits >> (8 * k)) & 0xFF;
    if (byte == 0) {
      if (bits >> (8 * k)) {
        char hex[40];
        std::snprintf(hex, sizeof(hex), "0x%llx", (unsigned long long)bits);
        return std::string("malformed axes code ") + hex +
               " (non-zero bytes after the terminating 0)";
      }
      break;
    }
    int axis = int(byte) - 1;
    if (axis >= numAxes)
      return "axes code lists axis " + std::to_string(axis) +
             " but the mesh has " + std::to_string(numAxes) + " axes";
    if (std::find(axes.begin(), axes.end(), axis) != axes.end())
      return "axes code lists axis " + std::to_string(axis) + " twice";
    axes.push_back(axis);
  }
  return {};
}

Group *par::rt::findGroup(par_rt_context_t &ctx, int64_t code,
                          std::string &why) {
  auto it = ctx.groups.find(code);
  if (it != ctx.groups.end())
    return &it->second;
  Group g;
  g.desc = {code, 1, 0, 0};
  why = decodeAxes(ctx, code, g.axes);
  if (!why.empty())
    return nullptr;
  // index: row-major over the listed axes in listed order.
  for (int a : g.axes) {
    g.desc.size *= ctx.meshSizes[a];
    g.desc.index = g.desc.index * ctx.meshSizes[a] + ctx.coords[a];
  }
  // color: row-major over the other axes in mesh order; the processes that
  // agree on those coordinates form the group.
  for (size_t a = 0; a < ctx.meshSizes.size(); ++a)
    if (std::find(g.axes.begin(), g.axes.end(), int(a)) == g.axes.end())
      g.desc.color = g.desc.color * ctx.meshSizes[a] + ctx.coords[a];
  return &ctx.groups.emplace(code, std::move(g)).first->second;
}

int64_t par::rt::peerRank(const par_rt_context_t &ctx, int64_t axes,
                          int64_t coords, std::string &why) {
  std::vector<int> listed;
  why = decodeAxes(ctx, axes, listed);
  if (!why.empty())
    return -1;
  if (listed.size() > 4) {
    why = "at most 4 listed axes fit the 64-bit coords (16 bits each)";
    return -1;
  }
  auto bits = static_cast<uint64_t>(coords);
  if (listed.size() < 4 && (bits >> (16 * listed.size())) != 0) {
    why = "coords has bits beyond the " + std::to_string(listed.size()) +
          " listed axes";
    return -1;
  }
  std::vector<int64_t> c = ctx.coords;
  for (size_t k = 0; k < listed.size(); ++k) {
    int64_t v = int64_t((bits >> (16 * k)) & 0xFFFF);
    int a = listed[k];
    if (v >= ctx.meshSizes[a]) {
      why = "coordinate " + std::to_string(v) + " on axis " +
            std::to_string(a) + " is outside its size " +
            std::to_string(ctx.meshSizes[a]);
      return -1;
    }
    c[a] = v;
  }
  return linearRank(ctx, c);
}

//===----------------------------------------------------------------------===//
// Host API: mesh and groups
//===----------------------------------------------------------------------===//

PAR_RT_EXPORT par_status_t par_rt_context_set_mesh(par_rt_context_t *context,
                                                   int64_t num_axes,
                                                   const int64_t *sizes) {
  if (!beginCall(context))
    return PAR_ERR_INVALID_ARGUMENT;
  par_rt_context_t &ctx = *context;
  int64_t devices = 1;
  std::string why = checkMeshSizes(num_axes, sizes, devices);
  if (!why.empty())
    return setError(ctx, PAR_ERR_INVALID_ARGUMENT, why);
  if (devices != ctx.worldSize)
    return setError(ctx, PAR_ERR_INVALID_ARGUMENT,
                    "world size " + std::to_string(ctx.worldSize) +
                        " does not match the mesh's " +
                        std::to_string(devices) + " devices");
  // Their communicators are about to go.
  if (!ctx.requests.empty())
    return setError(ctx, PAR_ERR_INVALID_ARGUMENT,
                    std::to_string(ctx.requests.size()) +
                        " started all-reduces are still pending (wait for "
                        "them before changing the mesh)");
  resetGroups(ctx);
  ctx.meshSizes.assign(sizes, sizes + num_axes);
  ctx.coords.assign(size_t(num_axes), 0);
  // Row-major, last axis fastest.
  int64_t r = ctx.rank;
  for (int64_t a = num_axes - 1; a >= 0; --a) {
    ctx.coords[a] = r % sizes[a];
    r /= sizes[a];
  }
  ctx.hasMesh = true;
  watchdogSetMesh(ctx);
  return PAR_OK;
}

PAR_RT_EXPORT par_status_t par_rt_context_prepare_axes(
    par_rt_context_t *context, int64_t axes) {
  if (!beginCall(context))
    return PAR_ERR_INVALID_ARGUMENT;
  std::string why;
  Group *g = findGroup(*context, axes, why);
  if (!g)
    return setError(*context, PAR_ERR_INVALID_ARGUMENT, why);
  const Backend &device = context->device;
  return backendStatus(*context, device,
                       device.ops->prepare_group(device.state, &g->desc));
}

PAR_RT_EXPORT int64_t par_rt_context_rank(const par_rt_context_t *context) {
  return context ? context->rank : -1;
}

PAR_RT_EXPORT int64_t
par_rt_context_world_size(const par_rt_context_t *context) {
  return context ? context->worldSize : -1;
}

PAR_RT_EXPORT int64_t par_rt_context_coordinate(const par_rt_context_t *context,
                                                int64_t axis) {
  if (!context || !context->hasMesh || axis < 0 ||
      axis >= int64_t(context->coords.size()))
    return -1;
  return context->coords[axis];
}

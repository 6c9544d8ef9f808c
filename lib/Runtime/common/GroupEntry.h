//===- GroupEntry.h - Table entries for group collectives -------*- C++ -*-===//
//
// A backend writes each collective as
//   par_status_t f(State &, const par_rt_backend_group_t *, Comm, args...)
// on the group's communicator; OnGroup<f>::entry is the table entry
//   par_status_t (void *state, const par_rt_backend_group_t *, args...)
// that first finds that communicator (creating it on first use) with the
// backend's own `groupComm(State &, const par_rt_backend_group_t *, Comm &)`,
// found by argument-dependent lookup next to State. One place for the
// look-up-then-call every collective of the MPI and CUDA backends shares.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_COMMON_GROUPENTRY_H
#define PAR_RUNTIME_COMMON_GROUPENTRY_H

#include "BackendApi.h"

namespace par::rt {

template <auto Fn> struct OnGroup;

template <typename State, typename Comm, typename... Args,
          par_status_t (*Fn)(State &, const par_rt_backend_group_t *, Comm,
                             Args...)>
struct OnGroup<Fn> {
  static par_status_t entry(void *state, const par_rt_backend_group_t *g,
                            Args... args) {
    State &s = *static_cast<State *>(state);
    Comm comm;
    if (par_status_t status = groupComm(s, g, comm))
      return status;
    return Fn(s, g, comm, args...);
  }
};

} // namespace par::rt

#endif // PAR_RUNTIME_COMMON_GROUPENTRY_H

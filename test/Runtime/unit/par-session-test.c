/*===- par-session-test.c - The session API from C -------------------------===*
 *
 * par-session-test ARTIFACT_DIR sharded|reference [FUNCTION]
 *
 * Drives a compiled artifact through the session API alone, from C (so the
 * header is checked to be C): creates a runtime context, opens the program,
 * prints the function's interface (mesh, every tensor's dtype, global and
 * local shape and sharding), scatters layout-independent global inputs,
 * calls the function on every rank, gathers each output to rank 0 and
 * compares it with a plain C evaluation of the test program
 * (test/e2e/Inputs/tanh-dp2.mlir: tanh(x @ w)). Then the same through
 * session buffers (par_session_buffer_*, par_function_call_buffers): one
 * call, and two with the result swapped into x's place (y has x's layout),
 * bit for bit equal to par_function_call's; buffer copy and zero; and the
 * refused calls (an output aliasing an input, a buffer too small). Then the
 * error paths: an unknown function, a missing artifact. Prints PASS/FAIL
 * lines and exits non-zero on any FAIL. Used by
 * test/Runtime/session-api.test.
 *
 *===----------------------------------------------------------------------===*/

#include "par/Runtime/par_runtime.h"
#include "par/Runtime/par_session.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
/* Only rank 0 reports passes; every rank reports its failures. Two ranks
 * writing the same lines into one pipe interleave them, and the test checks
 * rank 0's lines in order. */
static int quiet = 0;

static void check(int ok, const char *what) {
  if (!ok || !quiet)
    printf("%s %s\n", ok ? "PASS" : "FAIL", what);
  failures += !ok;
}

static void printShape(const char *label, int64_t rank, const int64_t *s) {
  printf(" %s=", label);
  for (int64_t d = 0; d < rank; ++d)
    printf("%s%lld", d ? "x" : "", (long long)s[d]);
}

static void printTensor(const par_function_t *f, const par_function_info_t *fi,
                        par_io_t io, int64_t i) {
  par_tensor_info_t t;
  if (par_function_tensor(f, io, i, &t) != PAR_OK)
    return;
  printf("  %s%lld %s", io == PAR_INPUT ? "arg" : "result", (long long)i,
         par_dtype_info(t.dtype)->name);
  printShape("global", t.rank, t.global_shape);
  printShape("local", t.rank, t.local_shape);
  printf(" split=[");
  const int64_t *axis = t.dim_axes;
  for (int64_t d = 0; d < t.rank; ++d) {
    printf("%s{", d ? ", " : "");
    for (int64_t k = 0; k < t.dim_axis_counts[d]; ++k)
      printf("%s%s", k ? ", " : "", fi->axes[*axis++].name);
    printf("}");
  }
  printf("] partial=%lld\n", (long long)t.num_partial);
}

/* Fills a global f32 tensor with values that depend on the index only. */
static float *globalInput(const par_function_t *f, int64_t i, double scale,
                          double offset) {
  par_tensor_info_t t;
  par_function_tensor(f, PAR_INPUT, i, &t);
  float *g = malloc(sizeof(float) * (size_t)t.global_count);
  for (int64_t k = 0; k < t.global_count; ++k)
    g[k] = (float)(scale * (double)(k % 7) + offset);
  return g;
}

/* tanh(x @ w) for x [M, K] and w [K, N], in double. */
static double maxError(const float *x, const float *w, const float *y,
                       int64_t M, int64_t K, int64_t N) {
  double err = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k)
        acc += (double)x[i * K + k] * (double)w[k * N + j];
      double e = fabs(tanh(acc) - (double)y[i * N + j]);
      err = e > err ? e : err;
    }
  return err;
}

/* The session buffer API on the same call (inputs lx, lw; par_function_
 * call's results y1 = f(x), y2 = f(y1) given). */
static void runBuffers(par_session_t *s, par_function_t *f, const float *lx,
                       const float *lw, const float *ly1, const float *ly2) {
  int root = par_function_rank(f) == 0;
  par_tensor_info_t tx, tw, ty;
  par_function_tensor(f, PAR_INPUT, 0, &tx);
  par_function_tensor(f, PAR_INPUT, 1, &tw);
  par_function_tensor(f, PAR_OUTPUT, 0, &ty);
  size_t bx = sizeof(float) * (size_t)tx.local_count,
         bw = sizeof(float) * (size_t)tw.local_count,
         by = sizeof(float) * (size_t)ty.local_count;
  if (root)
    printf("target %s, on device %d\n", par_session_target(s),
           par_session_on_device(s));
  par_buffer_t *x = NULL, *w = NULL, *y = NULL, *c = NULL, *small = NULL;
  check(par_session_buffer_alloc(s, bx, &x) == PAR_OK &&
            par_session_buffer_alloc(s, bw, &w) == PAR_OK &&
            par_session_buffer_alloc(s, by, &y) == PAR_OK &&
            par_session_buffer_alloc(s, bx, &c) == PAR_OK &&
            par_session_buffer_alloc(s, by / 2, &small) == PAR_OK &&
            par_buffer_size(x) == bx,
        "buffer_alloc");
  float *host = calloc(1, by > bx ? by : bx);
  check(par_session_buffer_download(s, y, host, by) == PAR_OK &&
            host[0] == 0.0f && host[ty.local_count - 1] == 0.0f,
        "buffers start zero-filled");
  check(par_session_buffer_upload(s, x, lx, bx) == PAR_OK &&
            par_session_buffer_upload(s, w, lw, bw) == PAR_OK,
        "buffer_upload");
  par_buffer_t *ins[2] = {x, w}, *outs[1] = {y};
  check(par_function_call_buffers(f, ins, outs) == PAR_OK, "call_buffers");
  check(par_session_buffer_download(s, y, host, by) == PAR_OK &&
            memcmp(host, ly1, by) == 0,
        "call_buffers equals call (bit for bit)");
  /* Feed the result back: swap x's and y's buffers, call again. */
  par_buffer_t *t = x;
  x = y;
  y = t;
  ins[0] = x;
  outs[0] = y;
  check(par_function_call_buffers(f, ins, outs) == PAR_OK &&
            par_session_buffer_download(s, y, host, by) == PAR_OK &&
            memcmp(host, ly2, by) == 0,
        "swapped buffers: second call equals call (bit for bit)");
  check(par_session_buffer_copy(s, c, y, by) == PAR_OK &&
            par_session_buffer_download(s, c, host, by) == PAR_OK &&
            memcmp(host, ly2, by) == 0,
        "buffer_copy");
  check(par_session_buffer_zero(s, c) == PAR_OK &&
            par_session_buffer_download(s, c, host, by) == PAR_OK &&
            host[0] == 0.0f && host[ty.local_count - 1] == 0.0f,
        "buffer_zero");
  /* Results into new buffers: the program's own allocation on a CPU
   * program (its memory counted once: live bytes grow by the result's
   * bytes, and fall back when it is freed). */
  par_buffer_t *fresh[1] = {NULL};
  par_rt_memory_stats_t m0, m1, m2;
  par_rt_alloc_stats_t a0, a1;
  par_rt_memory_stats(&m0);
  par_rt_alloc_stats(&a0);
  check(par_function_call_new(f, ins, fresh) == PAR_OK && fresh[0] &&
            par_buffer_size(fresh[0]) == by &&
            par_session_buffer_download(s, fresh[0], host, by) == PAR_OK &&
            memcmp(host, ly2, by) == 0,
        "call_new equals call (bit for bit)");
  par_rt_memory_stats(&m1);
  par_rt_alloc_stats(&a1);
  check(m1.live_bytes - m0.live_bytes == (int64_t)by,
        "call_new's result counted once");
  check(a1.live_bytes > a0.live_bytes,
        "call_new's result is the program's allocation (no copy)");
  par_session_buffer_free(s, fresh[0]);
  par_rt_memory_stats(&m2);
  check(m2.live_bytes == m0.live_bytes, "call_new's result freed");
  check(par_function_call_new(f, ins, fresh) == PAR_OK, "call_new again");
  /* fresh[0] is left for par_session_destroy. */
  par_buffer_t *badIns[2] = {x, NULL};
  check(par_function_call_new(f, badIns, fresh) != PAR_OK && !fresh[0],
        "call_new on a non-buffer refused, no result");
  if (root)
    printf("error: %s\n", par_session_last_error(s));
  outs[0] = x;
  check(par_function_call_buffers(f, ins, outs) != PAR_OK,
        "an output aliasing an input refused");
  if (root)
    printf("error: %s\n", par_session_last_error(s));
  outs[0] = small;
  check(par_function_call_buffers(f, ins, outs) != PAR_OK,
        "a too small output buffer refused");
  if (root)
    printf("error: %s\n", par_session_last_error(s));
  check(par_session_buffer_download(s, small, host, by) != PAR_OK,
        "a download past the end refused");
  if (root)
    printf("error: %s\n", par_session_last_error(s));
  par_session_buffer_free(s, x);
  par_session_buffer_free(s, y);
  par_session_buffer_free(s, c);
  par_session_buffer_free(s, NULL);
  /* w and small are left for par_session_destroy. */
  free(host);
}

static void run(par_session_t *s, par_function_t *f) {
  par_function_info_t fi;
  par_function_info(f, &fi);
  int root = par_function_rank(f) == 0;
  par_tensor_info_t tx, tw, ty;
  par_function_tensor(f, PAR_INPUT, 0, &tx);
  par_function_tensor(f, PAR_INPUT, 1, &tw);
  par_function_tensor(f, PAR_OUTPUT, 0, &ty);
  float *x = globalInput(f, 0, 0.25, -0.5), *w = globalInput(f, 1, 0.1, -0.3);
  float *lx = malloc(sizeof(float) * (size_t)tx.local_count);
  float *lw = malloc(sizeof(float) * (size_t)tw.local_count);
  float *ly = malloc(sizeof(float) * (size_t)ty.local_count);
  float *y = malloc(sizeof(float) * (size_t)ty.global_count);
  check(par_function_scatter(f, PAR_INPUT, 0, x, lx) == PAR_OK &&
            par_function_scatter(f, PAR_INPUT, 1, w, lw) == PAR_OK,
        "scatter");
  const void *ins[2] = {lx, lw};
  void *outs[1] = {ly};
  check(par_function_call(f, ins, outs) == PAR_OK, "call");
  check(par_function_gather(f, PAR_OUTPUT, 0, ly, root ? y : NULL, NULL) ==
            PAR_OK,
        "gather");
  if (root) {
    double err = maxError(x, w, y, tx.global_shape[0], tx.global_shape[1],
                          tw.global_shape[1]);
    printf("max abs error %.3g (tolerance 1e-5: f32 products and tanh)\n",
           err);
    check(err < 1e-5, "result equals tanh(x @ w)");
  }
  /* y2 = f(y1), y1 = ly: tanh(x @ w) has x's local layout. */
  if (tx.local_count == ty.local_count) {
    float *ly2 = malloc(sizeof(float) * (size_t)ty.local_count);
    const void *ins2[2] = {ly, lw};
    void *outs2[1] = {ly2};
    check(par_function_call(f, ins2, outs2) == PAR_OK, "call on the result");
    runBuffers(s, f, lx, lw, ly, ly2);
    free(ly2);
  }
  free(x);
  free(w);
  free(lx);
  free(lw);
  free(ly);
  free(y);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: par-session-test DIR sharded|reference [FN]\n");
    return 2;
  }
  par_rt_options_t ro;
  par_rt_options_initialize(&ro);
  par_rt_context_t *ctx = NULL;
  if (par_rt_context_create(&ro, &argc, &argv, &ctx) != PAR_OK) {
    fprintf(stderr, "par-session-test: %s\n", par_rt_context_last_error(ctx));
    return 1;
  }
  quiet = par_rt_context_rank(ctx) != 0;
  par_session_options_t so;
  par_session_options_initialize(&so);
  so.context = ctx;
  so.program = strcmp(argv[2], "reference") == 0 ? PAR_PROGRAM_REFERENCE
                                                 : PAR_PROGRAM_SHARDED;
  par_session_t *s = NULL;
  check(par_session_create(argv[1], &so, &s) == PAR_OK, "session_create");
  if (!s) {
    printf("%s\n", par_session_last_error(NULL));
    return 1;
  }
  par_function_t *f = NULL;
  check(par_session_lookup_function(s, argc > 3 ? argv[3] : NULL, &f) ==
            PAR_OK,
        "lookup_function");
  par_function_info_t fi;
  par_function_info(f, &fi);
  int64_t sizes[16];
  for (int64_t k = 0; k < fi.num_axes && k < 16; ++k)
    sizes[k] = fi.axes[k].size;
  check(par_rt_context_set_mesh(ctx, fi.num_axes, sizes) == PAR_OK,
        "set_mesh");
  if (par_function_rank(f) == 0) {
    printf("function %s: %lld inputs, %lld outputs, %lld devices\n", fi.name,
           (long long)fi.num_inputs, (long long)fi.num_outputs,
           (long long)fi.devices);
    for (int64_t i = 0; i < fi.num_inputs; ++i)
      printTensor(f, &fi, PAR_INPUT, i);
    for (int64_t i = 0; i < fi.num_outputs; ++i)
      printTensor(f, &fi, PAR_OUTPUT, i);
  }
  run(s, f);
  par_function_t *none = NULL;
  check(par_session_lookup_function(s, "no_such_function", &none) != PAR_OK,
        "unknown function refused");
  if (par_function_rank(f) == 0)
    printf("error: %s\n", par_session_last_error(s));
  par_session_t *missing = NULL;
  check(par_session_create("/nonexistent-artifact", &so, &missing) != PAR_OK,
        "missing artifact refused");
  if (par_function_rank(f) == 0)
    printf("error: %s\n", par_session_last_error(NULL));
  par_session_destroy(s);
  par_rt_context_destroy(ctx);
  if (failures || !quiet)
    printf("%d failed\n", failures);
  return failures ? 1 : 0;
}

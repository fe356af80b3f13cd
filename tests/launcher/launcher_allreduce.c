/* A rank of a launcher test: joins the job its launcher describes (collx_comm_create_from_env
 * reads COLLX_*, torchrun, Slurm or Open MPI variables), all-reduces its rank and prints
 *   rank R of W: sum S (expected E) source=COLLX_RESTART_COUNT...
 * so the shell tests can check that every rank agrees.
 * Usage: launcher_allreduce [ITERATIONS [INTERVAL_MS]]. ITERATIONS > 1 repeats the all-reduce
 * (the multi-host test cuts the link meanwhile). Exit: 0 right sums, 1 wrong sum, 4 a collx
 * call failed (its message on stderr). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "collx/collx.h"

static int fail(const char* what, collx_status_t st, collx_comm_t comm) {
  const char* message = collx_last_error(comm);
  fprintf(stderr, "%s failed: %s: %s\n", what, collx_status_name(st), message ? message : "");
  fflush(stderr);
  return 4;
}

static void sleep_ms(long ms) {
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (ms % 1000) * 1000000L;
  nanosleep(&ts, NULL);
}

int main(int argc, char** argv) {
  long iterations = argc > 1 ? atol(argv[1]) : 1;
  long interval_ms = argc > 2 ? atol(argv[2]) : 0;
  collx_comm_t comm = NULL;
  collx_status_t st = collx_comm_create_from_env(NULL, &comm);
  if (st != COLLX_OK) return fail("collx_comm_create_from_env", st, NULL);
  int32_t rank = -1, size = 0;
  collx_comm_rank(comm, &rank);
  collx_comm_size(comm, &size);
  const int64_t expected = (int64_t)size * (size - 1) / 2;
  for (long i = 0; i < iterations; ++i) {
    int64_t value = rank, sum = -1;
    st = collx_allreduce(&value, &sum, 1, COLLX_INT64, COLLX_SUM, comm, NULL);
    if (st != COLLX_OK) {
      int code = fail("collx_allreduce", st, comm);
      collx_comm_destroy(comm);
      return code;
    }
    if (i == 0 || i + 1 == iterations) {
      const char* restarts = getenv("COLLX_RESTART_COUNT");
      printf("rank %d of %d: sum %lld (expected %lld) restart %s\n", (int)rank, (int)size, (long long)sum,
             (long long)expected, restarts ? restarts : "-");
      fflush(stdout);
    }
    if (sum != expected) {
      collx_comm_destroy(comm);
      return 1;
    }
    if (interval_ms > 0) sleep_ms(interval_ms);
  }
  collx_comm_destroy(comm);
  return 0;
}

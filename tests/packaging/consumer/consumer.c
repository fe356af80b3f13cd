/* Smallest real use of an installed collx: join a world from the environment, all-reduce
 * one float, check the sum. Exit 0 only if everything worked. */
#include <collx/collx.h>
#include <stdio.h>

static int fail(const char* what, collx_status_t st, collx_comm_t comm) {
  fprintf(stderr, "consumer: %s: %s: %s\n", what, collx_status_name(st), collx_last_error(comm));
  return 1;
}

int main(void) {
  collx_comm_t comm = NULL;
  int32_t rank = -1, size = 0;
  float in, out = 0.0f;
  collx_status_t st = collx_comm_create_from_env(NULL, &comm);
  if (st != COLLX_OK) return fail("collx_comm_create_from_env", st, NULL);
  if ((st = collx_comm_rank(comm, &rank)) != COLLX_OK) return fail("collx_comm_rank", st, comm);
  if ((st = collx_comm_size(comm, &size)) != COLLX_OK) return fail("collx_comm_size", st, comm);
  in = (float)(rank + 1);
  st = collx_allreduce(&in, &out, 1, COLLX_FLOAT32, COLLX_SUM, comm, NULL);
  if (st != COLLX_OK) return fail("collx_allreduce", st, comm);
  if (out != (float)(size * (size + 1) / 2)) {
    fprintf(stderr, "consumer: rank %d: sum %g, expected %d\n", (int)rank, (double)out,
            (int)(size * (size + 1) / 2));
    return 1;
  }
  if ((st = collx_comm_destroy(comm)) != COLLX_OK) return fail("collx_comm_destroy", st, NULL);
  printf("consumer: rank %d of %d ok (collx %s)\n", (int)rank, (int)size, collx_get_version_string());
  return 0;
}

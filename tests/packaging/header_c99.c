/* The public header must stay plain C99: no C++ or GNU-only constructs, no warnings under
 * -pedantic -Werror. Touch the types and enums so their definitions are checked too. */
#include <collx/collx.h>
#include <collx/parallel.h>
#include <collx/topology.h>

int header_uses(void);
int header_uses(void) {
  collx_config_t config;
  collx_opts_t opts;
  collx_comm_t comm = NULL;
  collx_datatype_t dt = COLLX_FLOAT32;
  collx_op_t op = COLLX_SUM;
  (void)collx_config_init(&config, sizeof config);
  (void)collx_opts_init(&opts, sizeof opts);
  (void)collx_allreduce(NULL, NULL, 0, dt, op, comm, &opts);
  {
    collx_topo_t topo = NULL;
    collx_topo_object_t object;
    (void)collx_topo_object_init(&object, sizeof object);
    (void)collx_topo_get(topo, COLLX_TOPO_GPU, 0, &object);
    (void)collx_topo_destroy(topo);
  }
  return COLLX_VERSION_CODE > 0 && COLLX_OK == 0;
}

// C++ consumers include the same header: it must compile as C++11 (extern "C", no C-only
// constructs) with no warnings under -pedantic -Werror.
#include <collx/collx.h>
#include <collx/parallel.h>
#include <collx/topology.h>

int header_uses();
int header_uses() {
  collx_config_t config;
  collx_opts_t opts;
  collx_comm_t comm = nullptr;
  (void)collx_config_init(&config, sizeof config);
  (void)collx_opts_init(&opts, sizeof opts);
  (void)collx_allreduce(nullptr, nullptr, 0, COLLX_FLOAT32, COLLX_SUM, comm, &opts);
  {
    collx_topo_t topo = nullptr;
    collx_topo_object_t object;
    (void)collx_topo_object_init(&object, sizeof object);
    (void)collx_topo_get(topo, COLLX_TOPO_GPU, 0, &object);
    (void)collx_topo_destroy(topo);
  }
  return COLLX_VERSION_CODE > 0 && COLLX_OK == 0;
}

// The Python extension _collx_torch: the process-group constructor torch's backend registry
// calls, and CollxError as a Python exception (a RuntimeError subclass). collx_torch/__init__.py
// imports it and registers backend "collx".
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "bindings/torch/csrc/collx_error.h"
#include "bindings/torch/csrc/process_group.h"

namespace py = pybind11;

namespace {

// torch's creator signature: (store, rank, world_size, timeout as a timedelta).
c10::intrusive_ptr<c10d::ProcessGroup> create_process_group(const c10::intrusive_ptr<c10d::Store>& store,
                                                            int rank, int size,
                                                            std::chrono::duration<float> timeout) {
  auto timeout_ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
  return c10::make_intrusive<collx_torch::ProcessGroupCollx>(store, rank, size, timeout_ms);
}

}  // namespace

PYBIND11_MODULE(_collx_torch, m) {
  m.doc() = "collx process group for torch.distributed (use: import collx_torch)";
  // The c10d Store and ProcessGroup Python types must exist before they are converted.
  py::module::import("torch.distributed");
  py::register_exception<collx_torch::CollxError>(m, "CollxError", PyExc_RuntimeError);
  m.def("create_process_group", &create_process_group, py::arg("store"), py::arg("rank"),
        py::arg("world_size"), py::arg("timeout"),
        // Bootstrapping waits for the other ranks: let other Python threads run meanwhile.
        py::call_guard<py::gil_scoped_release>(),
        "A collx process group of `world_size` ranks bootstrapped through the c10d `store`; "
        "`timeout` becomes the collx deadline of every operation.");
  m.def("collx_version", [] { return std::string(collx_get_version_string()); },
        "Version of the collx library the plugin loaded.");
}

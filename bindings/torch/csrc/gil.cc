#include "bindings/torch/csrc/gil.h"

#include <Python.h>

namespace collx_torch {

ReleaseGilIfHeld::ReleaseGilIfHeld() {
  if (Py_IsInitialized() && PyGILState_Check()) saved_ = PyEval_SaveThread();
}

ReleaseGilIfHeld::~ReleaseGilIfHeld() {
  if (saved_) PyEval_RestoreThread(static_cast<PyThreadState*>(saved_));
}

}  // namespace collx_torch

// The one place the plugin's core touches the Python interpreter: a blocking wait inside a
// destructor that Python may run (dropping the last reference to a process group) must not
// hold the GIL, or a thread it waits for that needs the GIL (a Python future callback, the
// release of a tensor Python created) could never finish.
#pragma once

namespace collx_torch {

// Releases the GIL for its lifetime when the calling thread holds it; does nothing otherwise
// (a C++ caller, or an interpreter that is not running).
class ReleaseGilIfHeld {
 public:
  ReleaseGilIfHeld();
  ~ReleaseGilIfHeld();
  ReleaseGilIfHeld(const ReleaseGilIfHeld&) = delete;
  ReleaseGilIfHeld& operator=(const ReleaseGilIfHeld&) = delete;

 private:
  void* saved_ = nullptr;  // PyThreadState* while released
};

}  // namespace collx_torch

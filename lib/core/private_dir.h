// Directories and files that only this user can change: where collx writes files on its own
// (flight-record dumps, by default under the shared /tmp), another local user must not be
// able to plant a symbolic link, pre-create the directory, or read and rewrite what lands
// there (docs/security.md, "Files collx writes").
//
// Threads: the functions keep no state; concurrent calls on different names are safe.
#pragma once

#include <string>

#include "lib/common/status.h"
#include "lib/common/unique_fd.h"

namespace collx {

// Opens the directory `path`, creating it and any missing parents with mode 0700, and checks
// that it is this user's own: not a symbolic link (the last component is opened with
// O_NOFOLLOW), owned by the effective uid, and without any group or other permission bits.
// Anything else is COLLX_ERR_INVALID_USAGE naming the path and what is wrong with it (or
// COLLX_ERR_SYSTEM naming the failed call). On success *dir is an O_DIRECTORY descriptor for
// the checked directory itself, so a later rename of the path cannot redirect the writes.
Status open_private_dir(const std::string& path, UniqueFd* dir);

// Writes `text` as file `name` (a plain name, no '/') inside the directory `dir` that
// open_private_dir returned, atomically: a temporary file created with O_EXCL | O_NOFOLLOW
// and mode 0600, then renamed over `name` (a symbolic link already at `name` is replaced,
// never followed). `dir_path` only names the directory in messages.
Status write_private_file(const UniqueFd& dir, const std::string& dir_path, const std::string& name,
                          const std::string& text);

}  // namespace collx

// Owner-only directories and files (private_dir.h).
#include "lib/core/private_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "lib/common/strings.h"

namespace collx {

namespace {

Status failed(const char* what, const std::string& path, int error) {
  return make_status(COLLX_ERR_SYSTEM, "%s '%s': %s", what, path.c_str(), std::strerror(error));
}

// Why `path`, which O_NOFOLLOW | O_DIRECTORY refused with `error`, is not a usable directory.
Status refused_open(const std::string& path, int error) {
  struct stat st;
  if (error == ELOOP || (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))) {
    return make_status(COLLX_ERR_INVALID_USAGE,
                       "'%s' is a symbolic link: refusing to follow it (another user may have planted it); "
                       "use a real directory of your own",
                       path.c_str());
  }
  if (error == ENOTDIR) return make_status(COLLX_ERR_INVALID_USAGE, "'%s' is not a directory", path.c_str());
  return failed("cannot open directory", path, error);
}

Status check_owner_and_mode(const std::string& path, const struct stat& st) {
  const uid_t me = ::geteuid();
  if (st.st_uid != me) {
    return make_status(COLLX_ERR_INVALID_USAGE,
                       "directory '%s' belongs to uid %u, not to this user (uid %u): refusing to write there; "
                       "use a directory of your own",
                       path.c_str(), static_cast<unsigned>(st.st_uid), static_cast<unsigned>(me));
  }
  const unsigned mode = static_cast<unsigned>(st.st_mode) & 07777u;
  if ((mode & 077u) != 0) {
    return make_status(COLLX_ERR_INVALID_USAGE,
                       "directory '%s' has mode %04o: group and others must have no access (chmod 700 '%s')",
                       path.c_str(), mode, path.c_str());
  }
  return Status::Ok();
}

// mkdir -p with mode 0700 for every missing component (existing ones are left as they are).
Status make_missing_dirs(const std::string& path) {
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    const std::string part = path.substr(0, pos);
    if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return failed("cannot create directory", part, errno);
  }
  return Status::Ok();
}

Status write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status(COLLX_ERR_SYSTEM, n < 0 ? std::strerror(errno) : "short write");
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

Status open_private_dir(const std::string& raw_path, UniqueFd* dir) {
  // A trailing '/' would make open() follow a symbolic link despite O_NOFOLLOW.
  std::string path = raw_path;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  if (path.empty()) return make_status(COLLX_ERR_INVALID_ARG, "empty directory name");
  COLLX_RETURN_IF_ERROR(make_missing_dirs(path));
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return refused_open(path, errno);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return failed("cannot stat directory", path, errno);
  COLLX_RETURN_IF_ERROR(check_owner_and_mode(path, st));
  *dir = std::move(fd);
  return Status::Ok();
}

Status write_private_file(const UniqueFd& dir, const std::string& dir_path, const std::string& name,
                          const std::string& text) {
  const std::string path = dir_path + "/" + name;
  if (name.empty() || name.find('/') != std::string::npos) {
    return make_status(COLLX_ERR_INVALID_ARG, "'%s' is not a plain file name", name.c_str());
  }
  const std::string tmp = name + string_printf(".tmp%d", static_cast<int>(::getpid()));
  const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  UniqueFd fd(::openat(dir.get(), tmp.c_str(), flags, 0600));
  if (!fd.valid() && errno == EEXIST) {
    // Left by an earlier process with our pid (the directory is ours alone): replace it.
    ::unlinkat(dir.get(), tmp.c_str(), 0);
    fd.reset(::openat(dir.get(), tmp.c_str(), flags, 0600));
  }
  if (!fd.valid()) return failed("cannot create", dir_path + "/" + tmp, errno);
  Status st = write_all(fd.get(), text);
  if (st.ok() && ::close(fd.release()) != 0) st = Status(COLLX_ERR_SYSTEM, std::strerror(errno));
  if (st.ok() && ::renameat(dir.get(), tmp.c_str(), dir.get(), name.c_str()) != 0) {
    st = Status(COLLX_ERR_SYSTEM, std::strerror(errno));
  }
  if (!st.ok()) {
    ::unlinkat(dir.get(), tmp.c_str(), 0);
    return make_status(COLLX_ERR_SYSTEM, "cannot write '%s': %s", path.c_str(), st.message().c_str());
  }
  return Status::Ok();
}

}  // namespace collx

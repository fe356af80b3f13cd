// Creating, mapping and unlinking the per-rank segments; futex wake-ups.
#include "transports/shm/shm_segment.h"

#include "transports/shm/shm_ring.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cinttypes>
#include <climits>
#include <cstring>
#include <new>

namespace collx {
namespace shm {

namespace {
constexpr size_t kDataRingBytes = sizeof(RingHeader) + size_t{kDataCells} * kCellBytes;
constexpr size_t kCtrlRingBytes = sizeof(RingHeader) + size_t{kCtrlCells} * kCellBytes;
constexpr size_t kHeaderBytes = (sizeof(SegmentHeader) + 4095) / 4096 * 4096;
constexpr size_t kBoardHeaderBytes = (sizeof(BoardHeader) + 4095) / 4096 * 4096;
}  // namespace

size_t board_offset(int nranks) { return kHeaderBytes + size_t(nranks) * (kDataRingBytes + kCtrlRingBytes); }
size_t segment_bytes(int nranks) { return board_offset(nranks) + kBoardHeaderBytes + 2 * size_t{kBoardHalfBytes}; }
size_t data_ring_offset(int, int sender) { return kHeaderBytes + size_t(sender) * (kDataRingBytes + kCtrlRingBytes); }
size_t ctrl_ring_offset(int nranks, int sender) { return data_ring_offset(nranks, sender) + kDataRingBytes; }

Status make_segment_name(uint64_t comm_id, int rank, pid_t pid, std::string* out) {
  uint64_t random[2];
  size_t got = 0;
  while (got < sizeof random) {
    const ssize_t n = ::getrandom(reinterpret_cast<uint8_t*>(random) + got, sizeof random - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return system_error("getrandom for a shared-memory segment name", errno);
    got += static_cast<size_t>(n);
  }
  *out = string_printf("/collx-%016" PRIx64 "-%d-%d-%016" PRIx64 "%016" PRIx64, comm_id, rank, static_cast<int>(pid),
                       random[0], random[1]);
  return Status::Ok();
}

namespace {
// An object of another user, or one others may open, is not a peer's segment: a peer rank
// runs as this user and creates its segment 0600 with O_EXCL.
Status check_segment_owner(const std::string& name, int rank, const struct stat& st) {
  const uid_t me = ::geteuid();
  if (st.st_uid != me) {
    return make_status(COLLX_ERR_PROTOCOL,
                       "shared-memory segment %s of rank %d belongs to uid %u, not to this user (uid %u): refusing "
                       "to map it (every rank of a job runs as the same user)",
                       name.c_str(), rank, static_cast<unsigned>(st.st_uid), static_cast<unsigned>(me));
  }
  const unsigned mode = static_cast<unsigned>(st.st_mode) & 07777u;
  if ((mode & 077u) != 0) {
    return make_status(COLLX_ERR_PROTOCOL,
                       "shared-memory segment %s of rank %d has mode %04o, not 0600: refusing to map memory that "
                       "other users can open",
                       name.c_str(), rank, mode);
  }
  return Status::Ok();
}
}  // namespace

Segment::~Segment() {
  if (base_ != nullptr) ::munmap(base_, bytes_);
  unlink();
}

void Segment::unlink() {
  if (!linked_) return;
  ::shm_unlink(name_.c_str());
  linked_ = false;
}

RingHeader* Segment::data_ring(int sender) const {
  return reinterpret_cast<RingHeader*>(static_cast<uint8_t*>(base_) + data_ring_offset(nranks_, sender));
}
RingHeader* Segment::ctrl_ring(int sender) const {
  return reinterpret_cast<RingHeader*>(static_cast<uint8_t*>(base_) + ctrl_ring_offset(nranks_, sender));
}

BoardHeader* Segment::board_header() const {
  return reinterpret_cast<BoardHeader*>(static_cast<uint8_t*>(base_) + board_offset(nranks_));
}
uint8_t* Segment::board_half(int parity) const {
  return static_cast<uint8_t*>(base_) + board_offset(nranks_) + kBoardHeaderBytes + size_t(parity & 1) * kBoardHalfBytes;
}

Status Segment::create(const std::string& name, uint64_t comm_id, int rank, int nranks) {
  name_ = name;
  nranks_ = nranks;
  bytes_ = segment_bytes(nranks);
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return system_error(("shm_open " + name).c_str(), errno);
  linked_ = true;
  // Reserve the pages now: on a full /dev/shm (tmpfs) that is ENOSPC here, where a sparse
  // file would be SIGBUS at the first touch of a missing page.
  int e;
  do {
    e = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes_));
  } while (e == EINTR);
  if (e != 0) {
    ::close(fd);
    if (e == ENOSPC) {
      return make_status(COLLX_ERR_SYSTEM,
                         "shared-memory transport: cannot reserve %zu bytes for %s in /dev/shm: %s; /dev/shm is full "
                         "or too small for %d ranks (containers: raise --shm-size), or leave shm out of "
                         "COLLX_TRANSPORTS",
                         bytes_, name.c_str(), std::strerror(e), nranks);
    }
    return system_error(string_printf("reserving %zu bytes for %s in /dev/shm", bytes_, name.c_str()).c_str(), e);
  }
  void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  e = errno;
  ::close(fd);
  if (p == MAP_FAILED) return system_error(("mmap " + name).c_str(), e);
  base_ = p;
  // A fresh shm object is zero-filled: only the non-zero fields need writing.
  auto* h = new (base_) SegmentHeader();
  h->magic = kSegmentMagic;
  h->version = kSegmentVersion;
  h->nranks = static_cast<uint32_t>(nranks);
  h->comm_id = comm_id;
  h->rank = rank;
  h->pid = static_cast<int32_t>(::getpid());
  h->cell_bytes = kCellBytes;
  h->data_cells = kDataCells;
  h->ctrl_cells = kCtrlCells;
  h->board_half_bytes = kBoardHalfBytes;
  h->owner_address = reinterpret_cast<uintptr_t>(h);
  new (board_header()) BoardHeader();
  for (int s = 0; s < nranks; ++s) {
    new (data_ring(s)) RingHeader();
    new (ctrl_ring(s)) RingHeader();
  }
  return Status::Ok();
}

Status Segment::open(const std::string& name, uint64_t comm_id, int rank, int nranks, pid_t pid) {
  name_ = name;
  nranks_ = nranks;
  bytes_ = segment_bytes(nranks);
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) return system_error(("shm_open " + name).c_str(), errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return system_error(("fstat " + name).c_str(), e);
  }
  Status owner = check_segment_owner(name, rank, st);
  if (!owner.ok()) {
    ::close(fd);
    return owner;
  }
  if (st.st_size < static_cast<off_t>(bytes_)) {
    ::close(fd);
    return make_status(COLLX_ERR_PROTOCOL, "shared-memory segment %s of rank %d is too small", name.c_str(), rank);
  }
  void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  ::close(fd);
  if (p == MAP_FAILED) return system_error(("mmap " + name).c_str(), e);
  base_ = p;
  const SegmentHeader* h = header();
  if (h->magic != kSegmentMagic || h->version != kSegmentVersion || h->comm_id != comm_id || h->rank != rank ||
      h->nranks != static_cast<uint32_t>(nranks) || h->pid != pid || h->cell_bytes != kCellBytes ||
      h->data_cells != kDataCells || h->ctrl_cells != kCtrlCells ||
      h->board_half_bytes != kBoardHalfBytes) {
    return make_status(COLLX_ERR_PROTOCOL, "shared-memory segment %s does not belong to rank %d of this communicator",
                       name.c_str(), rank);
  }
  return Status::Ok();
}

void* tsan_sync_address(uint64_t comm_id, uint64_t a, uint64_t b) {
#if defined(__SANITIZE_THREAD__)
  static char sync[4096];
  uint64_t h = comm_id * 0x9e3779b97f4a7c15ull ^ (a + 1) * 0xc2b2ae3d27d4eb4full ^ (b + 7) * 0x165667b19e3779f9ull;
  return &sync[(h ^ (h >> 29)) % sizeof sync];
#else
  (void)comm_id, (void)a, (void)b;
  return nullptr;
#endif
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_us) {
  if (timeout_us <= 0) return;
  timespec ts;
  ts.tv_sec = timeout_us / 1000000;
  ts.tv_nsec = (timeout_us % 1000000) * 1000;
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void notify_segment(SegmentHeader* h) {
  h->futex.fetch_add(1, std::memory_order_seq_cst);
  if (h->sleepers.load(std::memory_order_seq_cst) > 0) futex_wake_all(&h->futex);
}

}  // namespace shm
}  // namespace collx

// The emulated device itself (COLLX_TEST_DEVICE=emulated): that it behaves like a GPU where
// collx's logic can go wrong. Host code touching a device pointer crashes; streams are
// asynchronous and ordered only by what the caller asks for (the ctest entry injects random
// delays); IPC handles open in another process with CUDA's lifetime rules; errors name what
// was wrong. Skips on a real GPU (nothing here is about one).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "lib/cuda/device.h"
#include "tests/gpu/gpu_test_util.h"

namespace collx {
namespace testing {
namespace {

class EmulatedDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::emulated()) GTEST_SKIP() << "not on the emulated device (COLLX_TEST_DEVICE=emulated)";
  }
};

const void* kPerThreadStream = reinterpret_cast<void*>(uintptr_t{2});

TEST_F(EmulatedDevice, HostDereferenceOfADevicePointerCrashes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  DeviceBuffer buf(4096);
  ASSERT_TRUE(buf.ok());
  volatile char* p = buf.get();
  EXPECT_DEATH({ (void)p[17]; }, "");
  EXPECT_DEATH({ p[0] = 1; }, "");
}

TEST_F(EmulatedDevice, PointerKindIsDeviceForAllocationsAndImportsOnly) {
  DeviceBuffer buf(10000);
  ASSERT_TRUE(buf.ok());
  EXPECT_EQ(COLLX_MEM_CUDA, cuda::pointer_kind(buf.get()));
  EXPECT_EQ(COLLX_MEM_CUDA, cuda::pointer_kind(buf.get() + 9999));
  int device = -1;
  ASSERT_TRUE(cuda::pointer_device(buf.get() + 5, &device).ok());
  EXPECT_EQ(device, 0);
  void* pinned = nullptr;
  ASSERT_TRUE(cuda::host_alloc_pinned(4096, &pinned).ok());
  EXPECT_EQ(COLLX_MEM_HOST, cuda::pointer_kind(pinned));
  cuda::host_free_pinned(pinned);
  int x = 0;
  EXPECT_EQ(COLLX_MEM_HOST, cuda::pointer_kind(&x));
  void* freed = nullptr;
  ASSERT_TRUE(cuda::device_alloc(64, &freed).ok());
  cuda::device_free(freed);
  EXPECT_EQ(COLLX_MEM_HOST, cuda::pointer_kind(freed));
}

// Stream B reads what stream A wrote only because B waits for A's event; the delays make a
// missing wait fail.
TEST_F(EmulatedDevice, StreamsAreOrderedOnlyByEventWaits) {
  const size_t bytes = 1 << 20;
  DeviceBuffer x(bytes), y(bytes);
  ASSERT_TRUE(x.ok() && y.ok());
  void *a = nullptr, *b = nullptr, *ev = nullptr;
  ASSERT_TRUE(cuda::stream_create(&a).ok() && cuda::stream_create(&b).ok() && cuda::event_create(&ev).ok());
  for (int round = 1; round <= 20; ++round) {
    ASSERT_TRUE(cuda::memset_async(x.get(), round, bytes, a).ok());
    ASSERT_TRUE(cuda::event_record(ev, a).ok());
    ASSERT_TRUE(cuda::stream_wait_event(b, ev).ok());
    ASSERT_TRUE(cuda::copy_async(y.get(), x.get(), bytes, cuda::CopyKind::kDeviceToDevice, b).ok());
    ASSERT_TRUE(cuda::stream_wait(b, Deadline::after_ms(30000), nullptr, "stream b").ok());
    auto got = y.read(bytes - 1, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0], round);
  }
  cuda::event_destroy(ev);
  cuda::stream_destroy(a);
  cuda::stream_destroy(b);
}

TEST_F(EmulatedDevice, QueuedWorkIsAsynchronousAndInOrder) {
  const size_t bytes = 16 << 20;
  std::vector<uint8_t> host(bytes, 7), out(bytes, 0);
  DeviceBuffer dev(bytes);
  ASSERT_TRUE(dev.ok());
  void* s = nullptr;
  void* ev = nullptr;
  ASSERT_TRUE(cuda::stream_create(&s).ok() && cuda::event_create(&ev).ok());
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(cuda::memset_async(dev.get(), i, bytes, s).ok());
  ASSERT_TRUE(cuda::copy_async(dev.get(), host.data(), bytes, cuda::CopyKind::kHostToDevice, s).ok());
  ASSERT_TRUE(cuda::copy_async(out.data(), dev.get(), bytes, cuda::CopyKind::kDeviceToHost, s).ok());
  ASSERT_TRUE(cuda::event_record(ev, s).ok());
  bool done = true;
  ASSERT_TRUE(cuda::event_done(ev, &done).ok());
  EXPECT_FALSE(done) << "8 memsets and two copies of 16 MiB finished before the call returned";
  ASSERT_TRUE(cuda::event_wait(ev, Deadline::after_ms(30000), nullptr, "the copies").ok());
  EXPECT_EQ(out[0], 7);
  EXPECT_EQ(out[bytes - 1], 7);
  cuda::event_destroy(ev);
  cuda::stream_destroy(s);
}

TEST_F(EmulatedDevice, DefaultStreamsSynchronizeWithEachOther) {
  const size_t bytes = 1 << 20;
  DeviceBuffer x(bytes), y(bytes);
  ASSERT_TRUE(x.ok() && y.ok());
  void* per_thread = const_cast<void*>(kPerThreadStream);
  for (int round = 1; round <= 10; ++round) {
    ASSERT_TRUE(cuda::memset_async(x.get(), round, bytes, nullptr).ok());  // legacy
    ASSERT_TRUE(cuda::copy_async(y.get(), x.get(), bytes, cuda::CopyKind::kDeviceToDevice, per_thread).ok());
    ASSERT_TRUE(cuda::memset_async(x.get(), 0, bytes, nullptr).ok());  // after the per-thread copy
    ASSERT_TRUE(cuda::stream_wait(nullptr, Deadline::after_ms(30000), nullptr, "legacy").ok());
    EXPECT_EQ(y.read(bytes - 1, 1).at(0), round);
    EXPECT_EQ(x.read(0, 1).at(0), 0);
  }
}

TEST_F(EmulatedDevice, BadPointersAndHandlesAreErrorsNotCrashes) {
  DeviceBuffer dev(256);
  ASSERT_TRUE(dev.ok());
  std::vector<uint8_t> host(512);
  Status st = cuda::copy_async(host.data(), dev.get(), 512, cuda::CopyKind::kDeviceToHost, nullptr);
  EXPECT_EQ(st.code(), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(st.message().find("overrun"), std::string::npos) << st.message();
  st = cuda::copy_async(dev.get(), dev.get(), 16, cuda::CopyKind::kHostToDevice, nullptr);
  EXPECT_NE(st.message().find("host memory is expected"), std::string::npos) << st.message();
  st = cuda::copy(host.data(), host.data() + 256, 16, cuda::CopyKind::kDeviceToHost);
  EXPECT_NE(st.message().find("not emulated device memory"), std::string::npos) << st.message();
  void* freed = nullptr;
  ASSERT_TRUE(cuda::device_alloc(64, &freed).ok());
  cuda::device_free(freed);
  st = cuda::memset_async(freed, 0, 64, nullptr);
  EXPECT_NE(st.message().find("freed"), std::string::npos) << st.message();
  void* s = nullptr;
  ASSERT_TRUE(cuda::stream_create(&s).ok());
  cuda::stream_destroy(s);
  st = cuda::memset_async(dev.get(), 0, 16, s);
  EXPECT_NE(st.message().find("not a live stream"), std::string::npos) << st.message();
  st = cuda::cuda_reduce(dev.get(), dev.get(), host.data(), 4, COLLX_FLOAT32, COLLX_SUM, nullptr);
  EXPECT_NE(st.message().find("second input"), std::string::npos) << st.message();
  EXPECT_FALSE(cuda::set_device(cuda::device_count()).ok());
}

// Work queued before a free still runs on live pages (the free waits for it, as cudaFree does).
TEST_F(EmulatedDevice, FreeAfterQueuedWorkDoesNotCrash) {
  std::vector<uint8_t> host(8 << 20, 3), out(8 << 20, 0);
  void* dev = nullptr;
  ASSERT_TRUE(cuda::device_alloc(host.size(), &dev).ok());
  ASSERT_TRUE(cuda::copy_async(dev, host.data(), host.size(), cuda::CopyKind::kHostToDevice, nullptr).ok());
  ASSERT_TRUE(cuda::copy_async(out.data(), dev, host.size(), cuda::CopyKind::kDeviceToHost, nullptr).ok());
  cuda::device_free(dev);
  ASSERT_TRUE(cuda::stream_wait(nullptr, Deadline::after_ms(30000), nullptr, "legacy").ok());
  EXPECT_EQ(out.back(), 3);
}

TEST_F(EmulatedDevice, DevicesHaveStableDistinctUuids) {
  const int n = cuda::device_count();
  ASSERT_GE(n, 1);
  uint8_t a[16], b[16];
  ASSERT_TRUE(cuda::device_uuid(0, a).ok() && cuda::device_uuid(0, b).ok());
  EXPECT_EQ(0, std::memcmp(a, b, 16));
  if (n > 1) {
    ASSERT_TRUE(cuda::device_uuid(1, b).ok());
    EXPECT_NE(0, std::memcmp(a, b, 16));
    ASSERT_TRUE(cuda::set_device(1).ok());
    DeviceBuffer on1(64);
    int device = -1;
    ASSERT_TRUE(cuda::pointer_device(on1.get(), &device).ok());
    EXPECT_EQ(device, 1);
    ASSERT_TRUE(cuda::set_device(0).ok());
  }
}

// Exit code of a forked child running `body` (which must not use gtest).
int in_child(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST_F(EmulatedDevice, IpcHandlesFollowCudaLifetimeRules) {
  const size_t bytes = 3 * 4096 + 5;
  std::vector<uint8_t> init(bytes);
  for (size_t i = 0; i < bytes; ++i) init[i] = static_cast<uint8_t>(i * 13);
  void* dev = nullptr;
  ASSERT_TRUE(cuda::device_alloc(bytes, &dev).ok());
  ASSERT_TRUE(cuda::copy(dev, init.data(), bytes, cuda::CopyKind::kHostToDevice).ok());
  cuda::IpcHandle handle;
  uintptr_t base = 0;
  size_t offset = 0;
  ASSERT_TRUE(cuda::ipc_get_handle(static_cast<char*>(dev) + 100, &handle, &base, &offset).ok());
  EXPECT_EQ(base, reinterpret_cast<uintptr_t>(dev));
  EXPECT_EQ(offset, 100u);
  void* mine = nullptr;
  Status st = cuda::ipc_open(handle, &mine);  // the owner cannot open its own handle
  EXPECT_EQ(st.code(), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(st.message().find("exported"), std::string::npos) << st.message();

  // A peer process maps it, reads the owner's bytes and writes its own.
  int pipe_to_parent[2], pipe_to_child[2];
  ASSERT_EQ(0, pipe(pipe_to_parent));
  ASSERT_EQ(0, pipe(pipe_to_child));
  const pid_t pid = fork();
  if (pid == 0) {
    void* peer = nullptr;
    if (!cuda::ipc_open(handle, &peer).ok()) _exit(2);
    void* again = nullptr;
    if (!cuda::ipc_open(handle, &again).ok() || again != peer) _exit(3);  // counted, same address
    if (cuda::pointer_kind(peer) != COLLX_MEM_CUDA) _exit(4);
    std::vector<uint8_t> got(bytes);
    if (!cuda::copy(got.data(), peer, bytes, cuda::CopyKind::kDeviceToHost).ok() || got != init) _exit(5);
    if (!cuda::memset_async(static_cast<char*>(peer) + 1, 0x42, 1, nullptr).ok()) _exit(6);
    if (!cuda::stream_wait(nullptr, Deadline::after_ms(10000), nullptr, "peer").ok()) _exit(7);
    (void)!write(pipe_to_parent[1], "w", 1);
    char c;
    if (read(pipe_to_child[0], &c, 1) != 1) _exit(8);  // the owner has freed it now
    if (!cuda::copy(got.data(), peer, bytes, cuda::CopyKind::kDeviceToHost).ok() || got[bytes - 1] != init[bytes - 1]) {
      _exit(9);  // still mapped here until closed
    }
    if (!cuda::ipc_close(peer).ok() || cuda::pointer_kind(peer) != COLLX_MEM_CUDA) _exit(10);  // one open left
    if (!cuda::ipc_close(peer).ok() || cuda::pointer_kind(peer) != COLLX_MEM_HOST) _exit(11);
    if (cuda::ipc_close(peer).ok()) _exit(12);
    void* late = nullptr;
    if (cuda::ipc_open(handle, &late).ok()) _exit(13);  // freed by its owner: gone
    _exit(0);
  }
  ASSERT_GT(pid, 0);
  char c = 0;
  ASSERT_EQ(1, read(pipe_to_parent[0], &c, 1));
  std::vector<uint8_t> got(2);
  ASSERT_TRUE(cuda::copy(got.data(), dev, 2, cuda::CopyKind::kDeviceToHost).ok());
  EXPECT_EQ(got[1], 0x42) << "the peer's write is not visible to the owner";
  cuda::device_free(dev);
  ASSERT_EQ(1, write(pipe_to_child[1], "f", 1));
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  for (int fd : {pipe_to_parent[0], pipe_to_parent[1], pipe_to_child[0], pipe_to_child[1]}) close(fd);
}

// Streams made before a fork are unknown in the child (an error, not a hang), and the
// child's own default stream works.
TEST_F(EmulatedDevice, ForkedChildStartsWithFreshStreams) {
  void* s = nullptr;
  ASSERT_TRUE(cuda::stream_create(&s).ok());
  DeviceBuffer buf(64);
  ASSERT_TRUE(cuda::memset_async(buf.get(), 1, 64, nullptr).ok());
  const int code = in_child([&] {
    if (cuda::memset_async(buf.get(), 2, 64, s).ok()) return 1;
    if (!cuda::memset_async(buf.get(), 3, 64, nullptr).ok()) return 2;
    return cuda::stream_wait(nullptr, Deadline::after_ms(10000), nullptr, "child").ok() ? 0 : 3;
  });
  EXPECT_EQ(code, 0);
  cuda::stream_destroy(s);
}

}  // namespace
}  // namespace testing
}  // namespace collx

// Zero-copy memory (collx_mem_alloc's engine): what it hands out, what it refuses, where it
// says a buffer lies, and that another mapping of the described region sees the same bytes.
#include "transports/shm/shm_memory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>


namespace collx {
namespace shm {
namespace {

TEST(SharedMemory, AllocationsArePageAlignedZeroFilledAndInTheirOwnMemoryFile) {
  void* p = nullptr;
  bool shared = false;
  ASSERT_TRUE(allocate_shared_memory(10000, &p, &shared).ok());
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(shared) << "memory files are available on Linux >= 3.17";
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(sysconf(_SC_PAGESIZE)), 0u);
  const auto* bytes = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < 10000; ++i) ASSERT_EQ(bytes[i], 0) << i;
  const SharedRegion region = find_shared_region(static_cast<char*>(p) + 100, 5000);
  EXPECT_NE(region.id, 0u);
  EXPECT_EQ(region.base, reinterpret_cast<uintptr_t>(p));
  EXPECT_GE(region.bytes, 10000u);
  EXPECT_GE(region.fd, 0);
  EXPECT_TRUE(free_shared_memory(p).ok());
}

TEST(SharedMemory, BadAllocationsAndFreesAreErrorsThatNameTheCall) {
  void* p = nullptr;
  Status s = allocate_shared_memory(0, &p, nullptr);
  EXPECT_EQ(s.code(), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(s.message().find("bytes is 0"), std::string::npos) << s.message();
  EXPECT_EQ(allocate_shared_memory(64, nullptr, nullptr).code(), COLLX_ERR_INVALID_ARG);
  EXPECT_EQ(allocate_shared_memory(SIZE_MAX, &p, nullptr).code(), COLLX_ERR_INVALID_ARG);

  int on_stack = 0;
  s = free_shared_memory(&on_stack);
  EXPECT_EQ(s.code(), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(s.message().find("not memory from collx_mem_alloc"), std::string::npos) << s.message();
  EXPECT_TRUE(free_shared_memory(nullptr).ok());

  ASSERT_TRUE(allocate_shared_memory(64, &p, nullptr).ok());
  EXPECT_EQ(free_shared_memory(static_cast<char*>(p) + 8).code(), COLLX_ERR_INVALID_ARG) << "not the base";
  EXPECT_TRUE(free_shared_memory(p).ok());
  EXPECT_EQ(free_shared_memory(p).code(), COLLX_ERR_INVALID_ARG) << "freed twice";
}

TEST(SharedMemory, OnlyMemoryWhollyInsideOneAllocationIsDescribedAsShared) {
  void* p = nullptr;
  ASSERT_TRUE(allocate_shared_memory(4096, &p, nullptr).ok());
  char* base = static_cast<char*>(p);
  EXPECT_NE(find_shared_region(base, 4096).id, 0u);
  EXPECT_EQ(find_shared_region(base + 1, 4096).id, 0u) << "runs past the end";
  int on_stack = 0;
  EXPECT_EQ(find_shared_region(&on_stack, sizeof on_stack).id, 0u);
  ASSERT_TRUE(free_shared_memory(p).ok());
  EXPECT_EQ(find_shared_region(base, 16).id, 0u) << "freed";
}

TEST(SharedMemory, AMappingOfTheDescribedRegionSeesTheOwnersWrites) {
  void* p = nullptr;
  ASSERT_TRUE(allocate_shared_memory(3 * 4096, &p, nullptr).ok());
  const SharedRegion region = find_shared_region(p, 3 * 4096);
  MappedRegion mapping;
  int error = 0;
  // A peer opens the owner's descriptor through /proc; this process plays both.
  ASSERT_TRUE(mapping.map(getpid(), region, &error)) << std::strerror(error);
  auto* words = static_cast<uint64_t*>(p);
  words[1000] = 0x1234567890abcdefull;
  const uint64_t remote = region.base + 1000 * sizeof(uint64_t);
  ASSERT_TRUE(mapping.holds(remote, 8));
  EXPECT_FALSE(mapping.holds(region.base + region.bytes - 4, 8));
  uint64_t seen = 0;
  std::memcpy(&seen, mapping.at(remote), sizeof seen);
  EXPECT_EQ(seen, 0x1234567890abcdefull);
  EXPECT_TRUE(free_shared_memory(p).ok());
}

TEST(SharedMemory, ADescriptorThatNoLongerHoldsTheRegionIsNotMapped) {
  void* p = nullptr;
  ASSERT_TRUE(allocate_shared_memory(4096, &p, nullptr).ok());
  SharedRegion region = find_shared_region(p, 4096);
  region.id += 1;  // as if the descriptor number had been reused by another file
  MappedRegion mapping;
  int error = 0;
  EXPECT_FALSE(mapping.map(getpid(), region, &error));
  EXPECT_EQ(error, ESTALE);
  EXPECT_FALSE(mapping.mapped());
  EXPECT_TRUE(free_shared_memory(p).ok());
}

}  // namespace
}  // namespace shm
}  // namespace collx

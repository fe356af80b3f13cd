// collx_last_error as collx.h promises it: the message belongs to the communicator, is the
// same from every thread, stays put (pointer and text) until the next failed call on that
// communicator, and is untouched by successful calls and by other communicators' failures.
// collx_last_error(NULL) is per thread and holds the thread's last failure of any call, with
// or without a communicator (docs/api-conventions.md).
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "tests/support/thread_ranks.h"

namespace collx {
namespace {

using testing::ThreadRanks;

// A failed call on `comm` whose message names `root`: a broadcast to a root that does not exist
// (COLLX_ERR_INVALID_ARG leaves the communicator usable).
void fail_with_root(collx_comm_t comm, int32_t root) {
  float x = 0;
  ASSERT_EQ(collx_broadcast(&x, &x, 1, COLLX_FLOAT32, root, comm, nullptr), COLLX_ERR_INVALID_ARG);
}

bool names_root(const char* message, int32_t root) {
  return std::string(message).find("root " + std::to_string(root) + " ") != std::string::npos;
}

TEST(LastError, EachCommunicatorKeepsItsOwnMessageForEveryThread) {
  ThreadRanks a(1), b(1);
  ASSERT_TRUE(a.ok() && b.ok()) << a.error() << b.error();
  collx_comm_t comm_a = a.comm(0), comm_b = b.comm(0);
  EXPECT_STREQ(collx_last_error(comm_a), "");

  fail_with_root(comm_a, 7);
  const char* message_a = collx_last_error(comm_a);
  ASSERT_TRUE(names_root(message_a, 7)) << message_a;
  const std::string text_a = message_a;

  // Another thread fails a call on the other communicator and reads both.
  std::string seen_a, seen_b;
  std::thread other([&] {
    fail_with_root(comm_b, 9);
    seen_a = collx_last_error(comm_a);
    seen_b = collx_last_error(comm_b);
  });
  other.join();
  EXPECT_EQ(seen_a, text_a);
  EXPECT_TRUE(names_root(seen_b.c_str(), 9)) << seen_b;

  // Here, after reading B's message too, A's pointer still holds A's message.
  const char* message_b = collx_last_error(comm_b);
  EXPECT_TRUE(names_root(message_b, 9)) << message_b;
  EXPECT_EQ(std::string(message_a), text_a);
  EXPECT_EQ(collx_last_error(comm_a), message_a);

  // A successful call leaves the message; the next failed call replaces it.
  float x = 1;
  ASSERT_EQ(collx_broadcast(&x, &x, 1, COLLX_FLOAT32, 0, comm_a, nullptr), COLLX_OK) << collx_last_error(comm_a);
  EXPECT_EQ(std::string(collx_last_error(comm_a)), text_a);
  fail_with_root(comm_a, 11);
  EXPECT_TRUE(names_root(collx_last_error(comm_a), 11)) << collx_last_error(comm_a);
  EXPECT_TRUE(names_root(collx_last_error(comm_b), 9)) << collx_last_error(comm_b);
}

TEST(LastError, AFailedCallOnACommunicatorAlsoLeavesItsMessageWithTheCallingThread) {
  ThreadRanks a(1);
  ASSERT_TRUE(a.ok()) << a.error();
  fail_with_root(a.comm(0), 5);
  EXPECT_TRUE(names_root(collx_last_error(nullptr), 5)) << collx_last_error(nullptr);
  std::string other_thread_sees;
  std::thread other([&] { other_thread_sees = collx_last_error(nullptr); });
  other.join();
  EXPECT_EQ(other_thread_sees, "");
}

TEST(LastError, WithoutACommunicatorTheMessageBelongsToTheThread) {
  ASSERT_EQ(collx_comm_rank(nullptr, nullptr), COLLX_ERR_INVALID_ARG);
  const std::string mine = collx_last_error(nullptr);
  ASSERT_NE(mine, "");
  std::string theirs;
  std::thread other([&] {
    theirs = collx_last_error(nullptr);
    collx_datatype_t dt;
    EXPECT_EQ(collx_datatype_from_name("no-such-type", &dt), COLLX_ERR_INVALID_ARG);
  });
  other.join();
  EXPECT_EQ(theirs, "");  // a new thread has seen no failure of its own
  EXPECT_EQ(std::string(collx_last_error(nullptr)), mine);
}

}  // namespace
}  // namespace collx

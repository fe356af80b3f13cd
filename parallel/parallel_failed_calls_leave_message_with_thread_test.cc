// The error rule of docs/api-conventions.md in the parallel layer: every failed call leaves
// its message with the calling thread (collx_last_error(NULL)), a call on a handle with the
// handle too, and a NULL handle or output is refused with a message naming it, never with a
// bare status.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "collx/collx.h"
#include "collx/parallel.h"

namespace {

bool contains(const char* text, const std::string& needle) {
  return std::string(text).find(needle) != std::string::npos;
}

collx_layout_t two_rank_layout() {
  collx_layout_config_t c;
  EXPECT_EQ(collx_layout_config_init(&c, sizeof c), COLLX_OK);
  c.dp_size = 2;
  collx_layout_t l = nullptr;
  EXPECT_EQ(collx_layout_create(&c, &l), COLLX_OK) << collx_last_error(nullptr);
  return l;
}

TEST(ParallelFailedCalls, AFailedCreateLeavesItsMessageWithTheThread) {
  collx_layout_config_t c;
  ASSERT_EQ(collx_layout_config_init(&c, sizeof c), COLLX_OK);
  c.dp_size = 0;
  collx_layout_t l = nullptr;
  ASSERT_EQ(collx_layout_create(&c, &l), COLLX_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(collx_last_error(nullptr), "collx_layout_create: dp_size is 0")) << collx_last_error(nullptr);
  // The per-type accessor given NULL is the thread's message, not a second copy.
  EXPECT_STREQ(collx_layout_last_error(nullptr), collx_last_error(nullptr));
}

TEST(ParallelFailedCalls, AFailedCallOnAHandleLeavesItsMessageWithTheHandleAndTheThread) {
  collx_layout_t l = two_rank_layout();
  ASSERT_EQ(collx_layout_add(l, 7, 16, COLLX_FLOAT32, 0), COLLX_OK);
  ASSERT_EQ(collx_layout_add(l, 7, 16, COLLX_FLOAT32, 0), COLLX_ERR_INVALID_ARG);
  const std::string on_handle = collx_layout_last_error(l);
  EXPECT_TRUE(contains(on_handle.c_str(), "tensor 7 is already registered")) << on_handle;
  EXPECT_EQ(std::string(collx_last_error(nullptr)), on_handle);

  // Another thread reads the handle's message, but its own thread message is empty.
  std::string handle_seen, thread_seen;
  std::thread other([&] {
    handle_seen = collx_layout_last_error(l);
    thread_seen = collx_last_error(nullptr);
  });
  other.join();
  EXPECT_EQ(handle_seen, on_handle);
  EXPECT_EQ(thread_seen, "");
  EXPECT_EQ(collx_layout_destroy(l), COLLX_OK);
}

TEST(ParallelFailedCalls, ANullHandleOrOutputIsRefusedWithAMessageNamingIt) {
  EXPECT_EQ(collx_dp_zero(nullptr), COLLX_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(collx_last_error(nullptr), "collx_dp_zero: dp is NULL")) << collx_last_error(nullptr);
  EXPECT_EQ(collx_zero_set_lr(nullptr, 1.0), COLLX_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(collx_last_error(nullptr), "collx_zero_set_lr: z is NULL")) << collx_last_error(nullptr);
  EXPECT_EQ(collx_clip_coef(1.0, 1.0, nullptr), COLLX_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(collx_last_error(nullptr), "collx_clip_coef: coef is NULL")) << collx_last_error(nullptr);
  EXPECT_EQ(collx_grid_config_init(nullptr, sizeof(collx_grid_config_t)), COLLX_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(collx_last_error(nullptr), "collx_grid_config_init: config is NULL"))
      << collx_last_error(nullptr);
}

TEST(ParallelFailedCalls, AMissingOutputOnAHandleIsRecordedOnTheHandleToo) {
  collx_scaler_config_t c;
  ASSERT_EQ(collx_scaler_config_init(&c, sizeof c), COLLX_OK);
  collx_scaler_t s = nullptr;
  ASSERT_EQ(collx_scaler_create(&c, &s), COLLX_OK) << collx_last_error(nullptr);
  EXPECT_EQ(collx_scaler_scale(s, nullptr), COLLX_ERR_INVALID_ARG);
  EXPECT_TRUE(contains(collx_scaler_last_error(s), "collx_scaler_scale: scaler or scale is NULL"))
      << collx_scaler_last_error(s);
  EXPECT_STREQ(collx_last_error(nullptr), collx_scaler_last_error(s));
  EXPECT_EQ(collx_scaler_destroy(s), COLLX_OK);
}

}  // namespace

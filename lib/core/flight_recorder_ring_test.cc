// The flight recorder's ring: records wrap around the fixed capacity, end() finds its record
// whichever started last, an overwritten record's end is ignored, and a start with a given
// clock reading keeps that reading.
#include "lib/core/flight_recorder.h"

#include <gtest/gtest.h>

#include <vector>

#include "collx/collx.h"
#include "tests/support/scoped_env.h"

namespace collx {
namespace {

transport::OpDesc desc_of(uint64_t seq) {
  transport::OpDesc d;
  d.kind = COLLX_COLL_ALLREDUCE;
  d.seq = seq;
  d.count = seq * 10;
  return d;
}

TEST(FlightRecorderRing, WrapsAroundAndEndsTheRightRecordInAnyOrder) {
  testing::ScopedEnv size("COLLX_FR_SIZE", "3");
  FlightRecorder fr;
  ASSERT_TRUE(fr.init("ring", 0, 1, 0, "", "none").ok());
  std::vector<uint64_t> ids;
  for (uint64_t seq = 1; seq <= 7; ++seq) ids.push_back(fr.start(desc_of(seq), -1));
  // Only the last three are live; ending them out of order hits each one's own slot.
  fr.end(ids[5], COLLX_OK);
  fr.end(ids[6], COLLX_ERR_TIMEOUT);
  fr.end(ids[4], COLLX_OK);
  fr.end(ids[0], COLLX_OK);  // overwritten long ago: ignored
  const std::vector<FrRecord> live = fr.snapshot();
  ASSERT_EQ(live.size(), 3u);
  for (size_t i = 0; i < live.size(); ++i) {
    EXPECT_EQ(live[i].id, ids[4 + i]);
    EXPECT_EQ(live[i].seq, 5 + i);
    EXPECT_EQ(live[i].count, (5 + i) * 10);
    EXPECT_GE(live[i].end_ns, live[i].start_ns);
  }
  EXPECT_EQ(live[0].state, FrState::kCompleted);
  EXPECT_EQ(live[1].state, FrState::kCompleted);
  EXPECT_EQ(live[2].state, FrState::kFailed);
  EXPECT_EQ(live[2].status, COLLX_ERR_TIMEOUT);
  fr.close();
}

TEST(FlightRecorderRing, StartAtKeepsTheGivenTimeForNewAndPostedRecords) {
  testing::ScopedEnv size("COLLX_FR_SIZE", "4");
  FlightRecorder fr;
  ASSERT_TRUE(fr.init("ring", 0, 1, 0, "", "none").ok());
  const uint64_t posted = fr.post(desc_of(1), -1);
  const uint64_t p2p = fr.start(desc_of(0), 1, COLLX_COLL_SEND);  // a send between post and start
  const uint64_t started = fr.start_at(desc_of(1), -1, -1, 123456789);
  EXPECT_EQ(started, posted);  // the posted record runs, no new one
  const uint64_t fresh = fr.start_at(desc_of(2), -1, -1, 987654321);
  fr.end(p2p, COLLX_OK);
  fr.end(started, COLLX_OK);
  fr.end(fresh, COLLX_OK);
  const std::vector<FrRecord> live = fr.snapshot();
  ASSERT_EQ(live.size(), 3u);
  EXPECT_EQ(live[0].id, posted);
  EXPECT_EQ(live[0].start_ns, 123456789);
  EXPECT_EQ(live[0].state, FrState::kCompleted);
  EXPECT_EQ(live[1].id, p2p);
  EXPECT_EQ(live[1].kind, COLLX_COLL_SEND);
  EXPECT_EQ(live[1].state, FrState::kCompleted);
  EXPECT_EQ(live[2].id, fresh);
  EXPECT_EQ(live[2].enqueue_ns, 987654321);
  EXPECT_EQ(live[2].start_ns, 987654321);
  EXPECT_EQ(live[2].state, FrState::kCompleted);
  fr.close();
}

}  // namespace
}  // namespace collx

// The store table's capacity: what counts against it (keys, key and value bytes), that a
// refused write changes nothing, and that replacing, shrinking or removing frees room.
#include "lib/store/store_table.h"

#include <gtest/gtest.h>

#include <string>

namespace collx {
namespace {

Bytes filled(size_t size) { return Bytes(size, 7); }

TEST(StoreTableTest, BytesCountKeysAndValues) {
  StoreTable table;
  ASSERT_TRUE(table.set("abc", filled(10)).ok());
  ASSERT_TRUE(table.set("de", filled(5)).ok());
  EXPECT_EQ(table.keys(), 2u);
  EXPECT_EQ(table.bytes(), 3u + 10 + 2 + 5);
  ASSERT_TRUE(table.set("abc", filled(1)).ok());
  EXPECT_EQ(table.bytes(), 3u + 1 + 2 + 5);
  table.remove("de");
  table.remove("missing");
  EXPECT_EQ(table.keys(), 1u);
  EXPECT_EQ(table.bytes(), 4u);
}

TEST(StoreTableTest, ARefusedWriteChangesNothing) {
  StoreTable table(StoreCapacity{2, 100});
  ASSERT_TRUE(table.set("a", filled(40)).ok());
  ASSERT_TRUE(table.set("b", filled(40)).ok());
  Status status = table.set("c", filled(1));
  EXPECT_EQ(status.code(), COLLX_ERR_NO_MEMORY);
  EXPECT_NE(status.message().find("limited to 2 keys"), std::string::npos) << status.message();
  status = table.set("a", filled(60));  // 1 + 60 + 1 + 40 = 102 > 100
  EXPECT_EQ(status.code(), COLLX_ERR_NO_MEMORY);
  EXPECT_NE(status.message().find("hold 102 bytes, above its limit of 100"), std::string::npos) << status.message();
  EXPECT_EQ(table.find("a")->size(), 40u);
  EXPECT_EQ(table.find("c"), nullptr);
  EXPECT_EQ(table.bytes(), 82u);
  ASSERT_TRUE(table.set("a", filled(58)).ok());  // exactly 100
  EXPECT_EQ(table.bytes(), 100u);
}

TEST(StoreTableTest, AddAndCompareSetRespectTheCapacity) {
  StoreTable table(StoreCapacity{1, 1000});
  int64_t value = 0;
  ASSERT_TRUE(table.add("n", 5, &value).ok());
  EXPECT_EQ(value, 5);
  EXPECT_EQ(table.add("m", 1, &value).code(), COLLX_ERR_NO_MEMORY);
  ASSERT_TRUE(table.add("n", 1, &value).ok());  // an existing counter needs no new key
  EXPECT_EQ(value, 6);
  Bytes current;
  bool stored = true;
  EXPECT_EQ(table.compare_set("x", Bytes(), filled(1), &current, &stored).code(), COLLX_ERR_NO_MEMORY);
  EXPECT_FALSE(stored);
  table.remove("n");
  ASSERT_TRUE(table.compare_set("x", Bytes(), filled(3), &current, &stored).ok());
  EXPECT_TRUE(stored);
  EXPECT_EQ(current, filled(3));
}

}  // namespace
}  // namespace collx

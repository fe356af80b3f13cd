#include "lib/common/settings.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <sstream>

namespace collx {
namespace {

TEST(ParseSize, AcceptsSuffixesAndRejectsJunk) {
  uint64_t v = 0;
  EXPECT_TRUE(parse_size("64K", &v));
  EXPECT_EQ(v, 65536u);
  EXPECT_TRUE(parse_size(" 2M ", &v));
  EXPECT_EQ(v, 2u << 20);
  EXPECT_TRUE(parse_size("1G", &v));
  EXPECT_EQ(v, 1u << 30);
  EXPECT_TRUE(parse_size("123", &v));
  EXPECT_EQ(v, 123u);
  EXPECT_TRUE(parse_size("inf", &v, /*allow_inf=*/true));
  EXPECT_EQ(v, UINT64_MAX);
  EXPECT_FALSE(parse_size("inf", &v));
  EXPECT_FALSE(parse_size("", &v));
  EXPECT_FALSE(parse_size("K", &v));
  EXPECT_FALSE(parse_size("12Q", &v));
  EXPECT_FALSE(parse_size("99999999999999999999", &v));
  EXPECT_FALSE(parse_size("20000000000G", &v));
}

TEST(Settings, MalformedValueIsAnErrorNamingTheVariable) {
  setenv("COLLX_TCP_NSOCKS", "two", 1);
  int64_t out = 0;
  Status st = setting_int(SettingId::TCP_NSOCKS, &out);
  unsetenv("COLLX_TCP_NSOCKS");
  EXPECT_EQ(st.code(), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(st.message().find("COLLX_TCP_NSOCKS='two'"), std::string::npos) << st.message();
}

TEST(Settings, DefaultAppliesWhenUnsetAndEnvironmentWinsWhenSet) {
  unsetenv("COLLX_TCP_NSOCKS");
  int64_t out = 0;
  bool found = false;
  ASSERT_TRUE(setting_int(SettingId::TCP_NSOCKS, &out, &found).ok());
  EXPECT_TRUE(found);
  EXPECT_EQ(out, 2);
  setenv("COLLX_TCP_NSOCKS", "4", 1);
  ASSERT_TRUE(setting_int(SettingId::TCP_NSOCKS, &out).ok());
  unsetenv("COLLX_TCP_NSOCKS");
  EXPECT_EQ(out, 4);
}

TEST(Settings, EveryNameIsPrefixedAndDocumented) {
  size_t count = 0;
  const SettingInfo* all = all_settings(&count);
  ASSERT_GT(count, 10u);
  for (size_t i = 0; i < count; ++i) {
    EXPECT_EQ(std::string(all[i].name).rfind("COLLX_", 0), 0u) << all[i].name;
    EXPECT_GT(std::string(all[i].meaning).size(), 10u) << all[i].name;
  }
}

TEST(Settings, EnvironmentReferenceInDocsMatchesTheRegistry) {
  std::ifstream in(COLLX_SOURCE_DIR "/docs/environment.md");
  ASSERT_TRUE(in.good()) << "docs/environment.md is missing";
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), settings_markdown())
      << "docs/environment.md is stale: regenerate it with build/tools/collx-info --settings-markdown";
}

}  // namespace
}  // namespace collx

#include "lib/common/host_port.h"

#include <gtest/gtest.h>

namespace collx {
namespace {

TEST(HostPort, ParsesNamesIpv4AndBracketedIpv6WithoutTheBrackets) {
  const struct { const char* text; const char* host; int port; } kCases[] = {
      {"node7:29500", "node7", 29500}, {"10.0.0.7:0", "10.0.0.7", 0},   {"*:65535", "*", 65535},
      {"[::1]:80", "::1", 80},         {"[fe80::1%eth0]:9", "fe80::1%eth0", 9}};
  for (const auto& c : kCases) {
    HostPort hp;
    ASSERT_TRUE(parse_host_port(c.text, "address", &hp).ok()) << c.text;
    EXPECT_EQ(hp.host, c.host) << c.text;
    EXPECT_EQ(hp.port, c.port) << c.text;
  }
}

TEST(HostPort, RejectsMalformedAddressesNamingThemAndLeavesTheOutputAlone) {
  for (const char* bad : {"", "node7", "node7:", ":80", "[]:80", "node7:99999", "node7:65536", "node7:12a",
                          "node7:-1", "node7:123456", "::1:80", "[::1]", "[::1]80", "[::1:80"}) {
    HostPort hp{"kept", 7};
    Status st = parse_host_port(bad, "store address", &hp);
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_EQ(st.code(), COLLX_ERR_INVALID_ARG) << bad;
    EXPECT_NE(st.message().find("store address '" + std::string(bad) + "'"), std::string::npos) << st.message();
    EXPECT_EQ(hp.host, "kept");
    EXPECT_EQ(hp.port, 7);
  }
}

TEST(HostPort, SaysWhatIsWrong) {
  HostPort hp;
  EXPECT_NE(parse_host_port("node7", "x", &hp).message().find("expected host:port"), std::string::npos);
  EXPECT_NE(parse_host_port(":80", "x", &hp).message().find("empty host"), std::string::npos);
  EXPECT_NE(parse_host_port("node7:1x", "x", &hp).message().find("0 to 65535"), std::string::npos);
  EXPECT_NE(parse_host_port("::1:80", "x", &hp).message().find("brackets"), std::string::npos);
}

TEST(HostPort, HostOfDropsThePortAndKeepsBareHosts) {
  EXPECT_EQ(host_of("node7:29500"), "node7");
  EXPECT_EQ(host_of("[::1]:80"), "::1");
  EXPECT_EQ(host_of("node7"), "node7");
  EXPECT_EQ(host_of("fe80::1"), "fe80::1");  // a bare IPv6 address has no port to drop
  EXPECT_EQ(host_of("[::1"), "");
  EXPECT_EQ(host_of(""), "");
}

TEST(HostPort, FormatIsTheInverseOfParse) {
  for (const char* text : {"node7:29500", "[::1]:80", "10.0.0.7:0"}) {
    HostPort hp;
    ASSERT_TRUE(parse_host_port(text, "address", &hp).ok()) << text;
    EXPECT_EQ(format_host_port(hp.host, hp.port), text);
  }
}

}  // namespace
}  // namespace collx

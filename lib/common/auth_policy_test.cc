// The rules for connections without a job token: which addresses count as loopback (no
// warning), and COLLX_REQUIRE_TOKEN turning a missing token into an error.
#include "lib/common/auth_policy.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdlib.h>

#include <string>

namespace collx {
namespace auth {
namespace {

bool loopback_v4(const char* text) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  EXPECT_EQ(::inet_pton(AF_INET, text, &address.sin_addr), 1) << text;
  return is_loopback(reinterpret_cast<const sockaddr*>(&address));
}

bool loopback_v6(const char* text) {
  sockaddr_in6 address{};
  address.sin6_family = AF_INET6;
  EXPECT_EQ(::inet_pton(AF_INET6, text, &address.sin6_addr), 1) << text;
  return is_loopback(reinterpret_cast<const sockaddr*>(&address));
}

TEST(AuthPolicy, LoopbackIsOnly127Slash8AndColonColon1) {
  EXPECT_TRUE(loopback_v4("127.0.0.1"));
  EXPECT_TRUE(loopback_v4("127.255.3.4"));
  EXPECT_FALSE(loopback_v4("0.0.0.0"));  // every interface: reachable from other hosts
  EXPECT_FALSE(loopback_v4("10.0.0.7"));
  EXPECT_FALSE(loopback_v4("128.0.0.1"));
  EXPECT_TRUE(loopback_v6("::1"));
  EXPECT_TRUE(loopback_v6("::ffff:127.0.0.1"));
  EXPECT_FALSE(loopback_v6("::"));
  EXPECT_FALSE(loopback_v6("::ffff:10.0.0.1"));
  EXPECT_FALSE(loopback_v6("fe80::1"));
  EXPECT_FALSE(is_loopback(nullptr));
}

TEST(AuthPolicy, RequireTokenRefusesOnlyAMissingToken) {
  ::unsetenv("COLLX_REQUIRE_TOKEN");
  EXPECT_TRUE(check_token_required("", "the thing").ok());
  ::setenv("COLLX_REQUIRE_TOKEN", "1", 1);
  Status missing = check_token_required("", "TCP transport of rank 3");
  Status present = check_token_required("secret", "TCP transport of rank 3");
  ::setenv("COLLX_REQUIRE_TOKEN", "maybe", 1);
  Status malformed = check_token_required("", "the thing");
  ::unsetenv("COLLX_REQUIRE_TOKEN");
  EXPECT_EQ(missing.code(), COLLX_ERR_INVALID_USAGE);
  EXPECT_EQ(missing.message().rfind("TCP transport of rank 3: COLLX_REQUIRE_TOKEN=1", 0), 0u) << missing.message();
  EXPECT_NE(missing.message().find("set COLLX_JOB_TOKEN"), std::string::npos) << missing.message();
  EXPECT_TRUE(present.ok());
  EXPECT_EQ(malformed.code(), COLLX_ERR_INVALID_ARG) << malformed.message();
}

}  // namespace
}  // namespace auth
}  // namespace collx

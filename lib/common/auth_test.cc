// The job token MACs: a known answer (computed independently with Python's hmac module), and
// every way a MAC must fail to verify (wrong token, wrong role, other nonces, one flipped bit).
#include "lib/common/auth.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <string>

namespace collx {
namespace auth {
namespace {

std::string hex(const Mac& mac) {
  std::string out;
  char digits[3];
  for (uint8_t b : mac) {
    std::snprintf(digits, sizeof digits, "%02x", b);
    out += digits;
  }
  return out;
}

struct Nonces {
  Nonce server, client;
  Nonces() {
    for (size_t i = 0; i < kNonceBytes; ++i) {
      server[i] = static_cast<uint8_t>(i);
      client[i] = static_cast<uint8_t>(32 + i);
    }
  }
};

TEST(Auth, KnownAnswerIsHmacSha256OfNoncesAndRole) {
  if (!available()) GTEST_SKIP() << "built without OpenSSL";
  Nonces n;
  Mac mac;
  ASSERT_TRUE(compute_mac("job-secret", n.server, n.client, Role::kClient, &mac).ok());
  EXPECT_EQ(hex(mac), "00375212b4b9a25f29221cbef4133748a2fbf55a3eb252e0cacd76b277541901");
  ASSERT_TRUE(compute_mac("job-secret", n.server, n.client, Role::kServer, &mac).ok());
  EXPECT_EQ(hex(mac), "a91fd71ed7d4aee55054c9d4fc3e381ffa86f35c9f82799fb3d2b87d8db8334f");
}

TEST(Auth, VerifyRefusesWrongTokenRoleNoncesAndFlippedBits) {
  if (!available()) GTEST_SKIP() << "built without OpenSSL";
  Nonces n;
  Mac mac;
  ASSERT_TRUE(compute_mac("token-a", n.server, n.client, Role::kClient, &mac).ok());
  EXPECT_TRUE(verify_mac("token-a", n.server, n.client, Role::kClient, mac));
  EXPECT_FALSE(verify_mac("token-b", n.server, n.client, Role::kClient, mac));
  EXPECT_FALSE(verify_mac("token-a", n.server, n.client, Role::kServer, mac));  // no reflection
  EXPECT_FALSE(verify_mac("token-a", n.client, n.server, Role::kClient, mac));  // nonces swapped
  Nonce other = n.server;
  other[31] ^= 1;
  EXPECT_FALSE(verify_mac("token-a", other, n.client, Role::kClient, mac));  // another challenge
  for (size_t bit : {0u, 100u, 255u}) {
    Mac flipped = mac;
    flipped[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    EXPECT_FALSE(verify_mac("token-a", n.server, n.client, Role::kClient, flipped)) << "bit " << bit;
  }
  EXPECT_FALSE(verify_mac("", n.server, n.client, Role::kClient, mac));
}

TEST(Auth, NoncesAreFresh) {
  if (!available()) GTEST_SKIP() << "built without OpenSSL";
  Nonce a, b;
  ASSERT_TRUE(make_nonce(&a).ok());
  ASSERT_TRUE(make_nonce(&b).ok());
  EXPECT_NE(a, b);
}

TEST(Auth, EmptyTokenIsAnError) {
  Nonces n;
  Mac mac;
  EXPECT_FALSE(compute_mac("", n.server, n.client, Role::kClient, &mac).ok());
}

TEST(Auth, TokenFromSettings) {
  std::string token = "x";
  ::unsetenv("COLLX_JOB_TOKEN");
  ASSERT_TRUE(job_token_from_settings(&token).ok());
  EXPECT_EQ(token, "");
  const std::string good = "0123456789abcdef";  // kMinTokenBytes exactly
  ::setenv("COLLX_JOB_TOKEN", good.c_str(), 1);
  Status status = job_token_from_settings(&token);
  ::unsetenv("COLLX_JOB_TOKEN");
  if (available()) {
    EXPECT_TRUE(status.ok());
    EXPECT_EQ(token, good);
  } else {  // a set token is never silently ignored
    EXPECT_EQ(status.code(), COLLX_ERR_UNSUPPORTED);
    EXPECT_NE(status.message().find("OpenSSL"), std::string::npos);
  }
}

TEST(Auth, ShortTokenIsAnErrorNamingTheVariableNotTheToken) {
  std::string token = "x";
  ::setenv("COLLX_JOB_TOKEN", "s3cret-short-15", 1);  // one byte short of kMinTokenBytes
  Status status = job_token_from_settings(&token);
  ::unsetenv("COLLX_JOB_TOKEN");
  EXPECT_EQ(status.code(), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(status.message().find("COLLX_JOB_TOKEN is 15 bytes long"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("at least 16"), std::string::npos) << status.message();
  EXPECT_EQ(status.message().find("s3cret"), std::string::npos) << "the message shows the token";
  EXPECT_EQ(token, "");
}

}  // namespace
}  // namespace auth
}  // namespace collx

#include "server/common/api_keys.h"

#include <gtest/gtest.h>

namespace mcserve::server {
namespace {

TEST(ApiKeysTest, NoKeysMeansAuthenticationIsOff) {
  ApiKeys keys;
  EXPECT_FALSE(keys.enabled());
  EXPECT_FALSE(keys.Authenticate("Bearer anything").has_value());
  EXPECT_FALSE(ApiKeys::Single("").enabled());
}

TEST(ApiKeysTest, SingleKeyIsNamedDefault) {
  ApiKeys keys = ApiKeys::Single("s3cret");
  EXPECT_TRUE(keys.enabled());
  EXPECT_EQ(keys.Authenticate("Bearer s3cret"), "default");
  EXPECT_FALSE(keys.Authenticate("Bearer s3cre").has_value());
  EXPECT_FALSE(keys.Authenticate("Bearer s3cret ").has_value());
  EXPECT_FALSE(keys.Authenticate("bearer s3cret").has_value());
  EXPECT_FALSE(keys.Authenticate("s3cret").has_value());
  EXPECT_FALSE(keys.Authenticate("").has_value());
}

TEST(ApiKeysTest, FileNamesEachKey) {
  auto keys = ApiKeys::Parse("# team keys\nalice  key-a\n\n\tbob\tkey-b  \n", "keys.txt");
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_EQ(keys->names(), (std::vector<std::string>{"alice", "bob"}));
  EXPECT_EQ(keys->Authenticate("Bearer key-a"), "alice");
  EXPECT_EQ(keys->Authenticate("Bearer key-b"), "bob");
  EXPECT_FALSE(keys->Authenticate("Bearer key-c").has_value());
  EXPECT_FALSE(keys->Authenticate("Bearer alice").has_value());
}

TEST(ApiKeysTest, MalformedFilesNameTheLine) {
  struct Case {
    const char* text;
    const char* expected;
  };
  for (const Case& c : {Case{"alice\n", "keys.txt:1: expected `NAME KEY`, got 1 fields"},
                        Case{"alice a b\n", "keys.txt:1: expected `NAME KEY`, got 3 fields"},
                        Case{"ok k1\nal/ice k2\n", "keys.txt:2: the name must be"},
                        Case{"alice k1\nalice k2\n", "keys.txt:2: the name \"alice\" is repeated"},
                        Case{"alice k1\nbob k1\n", "keys.txt:2: the key of \"bob\" is also \"alice\"'s"},
                        Case{"# nothing\n\n", "keys.txt: no key"}}) {
    auto keys = ApiKeys::Parse(c.text, "keys.txt");
    ASSERT_FALSE(keys.ok()) << c.text;
    EXPECT_TRUE(absl::IsInvalidArgument(keys.status()));
    EXPECT_NE(keys.status().message().find(c.expected), std::string::npos) << keys.status();
  }
  EXPECT_FALSE(ApiKeys::FromFile("/nonexistent/keys.txt").ok());
}

TEST(ApiKeysTest, ConstantTimeEqualsIsEquality) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "ab"));
  EXPECT_FALSE(ConstantTimeEquals("ab", "abc"));
  EXPECT_FALSE(ConstantTimeEquals(absl::string_view("a\0", 2), "a"));
}

}  // namespace
}  // namespace mcserve::server

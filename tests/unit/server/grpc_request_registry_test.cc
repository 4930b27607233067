#include "server/grpc/request_registry.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "server/grpc/request_ids.h"

namespace mcserve::server {
namespace {

// The id `owner` gets for `client_id`, attached to `engine_id`; fails the test if refused.
std::string Add(RequestRegistry& registry, const std::string& owner, const std::string& client_id, uint64_t engine_id) {
  absl::StatusOr<std::string> id = registry.Reserve(owner, client_id);
  EXPECT_TRUE(id.ok()) << id.status();
  if (!id.ok()) return "";
  registry.Attach(owner, *id, engine_id);
  return *id;
}

TEST(RequestIdsTest, ServerIdsAreReqAnd32HexDigitsAndDiffer) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    absl::StatusOr<std::string> id = NewServerRequestId();
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_TRUE(IsServerRequestId(*id)) << *id;
    EXPECT_EQ(id->size(), 36u);
    EXPECT_TRUE(seen.insert(*id).second) << "repeated " << *id;
  }
}

TEST(RequestIdsTest, RecognizesOnlyTheServerForm) {
  EXPECT_TRUE(IsServerRequestId("req-0123456789abcdef0123456789abcdef"));
  EXPECT_FALSE(IsServerRequestId("req-0123456789ABCDEF0123456789abcdef"));  // uppercase
  EXPECT_FALSE(IsServerRequestId("req-0123456789abcdef0123456789abcde"));   // 31 digits
  EXPECT_FALSE(IsServerRequestId("req-0123456789abcdef0123456789abcdef0"));
  EXPECT_FALSE(IsServerRequestId("req-0123456789abcdef0123456789abcdeg"));
  EXPECT_FALSE(IsServerRequestId("rex-0123456789abcdef0123456789abcdef"));
  EXPECT_FALSE(IsServerRequestId("req-12"));
  EXPECT_FALSE(IsServerRequestId(""));
}

TEST(RequestRegistryTest, AnonymousRequestsGetFreshServerIds) {
  RequestRegistry registry(/*bind_server_ids=*/false);
  const std::string a = Add(registry, "alice", "", 1);
  const std::string b = Add(registry, "alice", "", 2);
  EXPECT_TRUE(IsServerRequestId(a)) << a;
  EXPECT_NE(a, b);
  EXPECT_EQ(registry.size(), 2u);
}

TEST(RequestRegistryTest, ClientIdsLiveInTheirOwnersNamespace) {
  RequestRegistry registry(/*bind_server_ids=*/false);
  EXPECT_EQ(Add(registry, "alice", "job-1", 1), "job-1");
  EXPECT_EQ(Add(registry, "bob", "job-1", 2), "job-1");  // another caller may use the same id
  EXPECT_EQ(registry.Find("alice", "job-1").value_or(0), 1u);
  EXPECT_EQ(registry.Find("bob", "job-1").value_or(0), 2u);
  absl::StatusOr<std::string> again = registry.Reserve("alice", "job-1");
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists) << again.status();
  registry.Release("alice", "job-1");
  EXPECT_EQ(Add(registry, "alice", "job-1", 3), "job-1");  // free again once released
  EXPECT_EQ(registry.Find("bob", "job-1").value_or(0), 2u);
}

TEST(RequestRegistryTest, OthersCannotFindAClientIdAndLearnNothing) {
  RequestRegistry registry(/*bind_server_ids=*/false);
  Add(registry, "alice", "job-1", 1);
  const absl::StatusOr<uint64_t> someone_elses = registry.Find("mallory", "job-1");
  const absl::StatusOr<uint64_t> unknown = registry.Find("mallory", "job-2");
  EXPECT_EQ(someone_elses.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(someone_elses.status().message(), RequestRegistry::NotFound("job-1").message());
  EXPECT_EQ(unknown.status().message(), RequestRegistry::NotFound("job-2").message());
}

TEST(RequestRegistryTest, WithoutKeysAServerIdIsACapability) {
  RequestRegistry registry(/*bind_server_ids=*/false);
  const std::string id = Add(registry, "alice", "", 7);
  EXPECT_EQ(registry.Find("alice", id).value_or(0), 7u);
  EXPECT_EQ(registry.Find("another connection", id).value_or(0), 7u);
}

TEST(RequestRegistryTest, WithKeysAServerIdIsItsOwners) {
  RequestRegistry registry(/*bind_server_ids=*/true);
  const std::string id = Add(registry, "alice", "", 7);
  EXPECT_EQ(registry.Find("alice", id).value_or(0), 7u);
  const absl::StatusOr<uint64_t> other = registry.Find("bob", id);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(other.status().message(), RequestRegistry::NotFound(id).message());
  registry.Release("bob", id);  // not bob's to release
  EXPECT_EQ(registry.Find("alice", id).value_or(0), 7u);
}

TEST(RequestRegistryTest, ClientIdsCannotTakeTheServerForm) {
  RequestRegistry registry(/*bind_server_ids=*/false);
  const std::string server_id = Add(registry, "alice", "", 7);
  for (const std::string& squat : {server_id, std::string("req-00000000000000000000000000000000")}) {
    absl::StatusOr<std::string> id = registry.Reserve("mallory", squat);
    EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument) << squat;
  }
  EXPECT_EQ(registry.Find("bob", server_id).value_or(0), 7u);
  EXPECT_EQ(Add(registry, "mallory", "req-12", 8), "req-12");  // other req- names stay the client's own
}

TEST(RequestRegistryTest, UnattachedAndReleasedIdsAreNotFound) {
  RequestRegistry registry(/*bind_server_ids=*/false);
  absl::StatusOr<std::string> id = registry.Reserve("alice", "job-1");
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(registry.Find("alice", "job-1").status().code(), absl::StatusCode::kNotFound);
  registry.Attach("alice", "job-1", 4);
  EXPECT_EQ(registry.Find("alice", "job-1").value_or(0), 4u);
  registry.Release("alice", "job-1");
  EXPECT_EQ(registry.Find("alice", "job-1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry.size(), 0u);
}

TEST(RequestRegistryTest, LongClientIdsAreRefused) {
  RequestRegistry registry(/*bind_server_ids=*/false);
  const std::string longest(RequestRegistry::kMaxClientIdBytes, 'x');
  EXPECT_TRUE(registry.Reserve("alice", longest).ok());
  EXPECT_EQ(registry.Reserve("alice", longest + "x").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mcserve::server

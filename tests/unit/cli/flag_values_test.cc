// The flag spellings every binary accepts (NormalizedFlagNames) and the flag-naming errors.
#include "cli/flag_values.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace mcserve::cli {
namespace {

std::vector<std::string> Normalized(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return NormalizedFlagNames(static_cast<int>(argv.size()), argv.data());
}

TEST(FlagValuesTest, DashesInNamesBecomeUnderscoresAndValuesAreLeftAlone) {
  EXPECT_EQ(Normalized({"prog-name", "--grpc-port=8001", "--mc-top-k", "2", "--prompt=a-b --c-d", "plain-arg"}),
            (std::vector<std::string>{"prog-name", "--grpc_port=8001", "--mc_top_k", "2", "--prompt=a-b --c-d",
                                      "plain-arg"}));
}

TEST(FlagValuesTest, NegatedBooleansInEitherSpellingBecomeAbslsNoPrefix) {
  EXPECT_EQ(Normalized({"p", "--no-prefix-caching", "--no_stream", "--nothing"}),
            (std::vector<std::string>{"p", "--noprefix_caching", "--nostream", "--nothing"}));
}

TEST(FlagValuesTest, ErrorsNameTheFlag) {
  const absl::Status s = ForFlag("max-tokens", absl::InvalidArgumentError("must be ≥ 1"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "--max-tokens: must be ≥ 1");
  EXPECT_EQ(DeviceFromFlagValue("cpu").value(), kernels::Device::kCpu);
  const absl::Status bad = DeviceFromFlagValue("tpu").status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message().rfind("--device: ", 0), 0u) << bad.message();
}

}  // namespace
}  // namespace mcserve::cli

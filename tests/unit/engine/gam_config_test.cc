// The `gam` config schema (docs/model-format.md, `gam`; the reference's gam_config.py rules): the
// official ModelConfig defaults, the mapping onto the skeleton, and an unknown key or unsupported
// value is an error naming the field (memory_caching: Unimplemented).
#include <string>

#include "engine/model/model_config.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/model_test_util.h"

namespace mcserve::engine {
namespace {

using testing::HasError;

constexpr char kSource[] = "/models/g/config.json";

absl::StatusOr<ModelConfig> Parse(const std::string& extra) {
  return ParseModelConfig(R"({"model_type":"gam")" + (extra.empty() ? "" : "," + extra) + "}", kSource);
}

TEST(GamConfigTest, DefaultsAreThePapersModel) {
  auto c = Parse("");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->family, ModelFamily::kGam);
  EXPECT_EQ(c->vocab_size, 10000);
  EXPECT_EQ(c->hidden_size, 512);
  EXPECT_EQ(c->num_hidden_layers, 6);
  EXPECT_EQ(c->intermediate_size, 2048);
  EXPECT_FLOAT_EQ(c->norm_eps, 1e-5f);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->gam.block_size, 256);
  EXPECT_EQ(c->gam.num_memory_slots, 512);
  EXPECT_EQ(c->gam.conv_kernel_size, 3);
  EXPECT_FALSE(c->gam.clamp_positions);
  EXPECT_EQ(c->gam.overflow_position, 255);
  EXPECT_EQ(c->gam.receptive_tokens, 12);
  EXPECT_EQ(c->max_positions(), 256);
}

TEST(GamConfigTest, ClampAndOverflowPosition) {
  auto c = Parse(R"("position_overflow":"clamp","overflow_position":12,"receptive_tokens":12,"dropout":0)");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->gam.clamp_positions);
  EXPECT_EQ(c->gam.overflow_position, 12);
  EXPECT_EQ(c->max_positions(), 0);
}

TEST(GamConfigTest, BadFieldsAreRejectedNamingTheField) {
  const absl::StatusCode bad = absl::StatusCode::kInvalidArgument;
  EXPECT_TRUE(HasError(Parse(R"("hidden_size":32)").status(), bad, {"hidden_size", "not a gam config field"}));
  EXPECT_TRUE(HasError(Parse(R"("n_embed":0)").status(), bad, {"n_embed", ">= 1"}));
  EXPECT_TRUE(HasError(Parse(R"("n_layer":2.5)").status(), bad, {"n_layer"}));
  EXPECT_TRUE(HasError(Parse(R"("fusion":"sum")").status(), bad, {"fusion"}));
  EXPECT_TRUE(HasError(Parse(R"("position_overflow":"wrap")").status(), bad, {"position_overflow"}));
  EXPECT_TRUE(HasError(Parse(R"("overflow_position":11)").status(), bad, {"overflow_position", "[12, 255]"}));
  EXPECT_TRUE(HasError(Parse(R"("overflow_position":256)").status(), bad, {"overflow_position"}));
  EXPECT_TRUE(HasError(Parse(R"("tie_word_embeddings":false)").status(), bad, {"tie_word_embeddings"}));
  EXPECT_TRUE(HasError(Parse(R"("layer_norm_eps":0)").status(), bad, {"layer_norm_eps"}));
  EXPECT_TRUE(HasError(Parse(R"("dropout":1.0)").status(), bad, {"dropout"}));
  EXPECT_TRUE(HasError(Parse(R"("receptive_tokens":5)").status(), bad, {"receptive_tokens", "derived"}));
  EXPECT_TRUE(HasError(Parse(R"("memory_caching":{"aggregation":"grm"})").status(),
                       absl::StatusCode::kUnimplemented, {"gam", "memory_caching"}));
}

}  // namespace
}  // namespace mcserve::engine

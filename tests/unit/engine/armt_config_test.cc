// The `armt` config schema (docs/model-format.md, `armt`; the reference's armt_config.py rules): HF
// GPT-2's defaults plus the required ARMT fields, the mapping onto the skeleton, and an unknown key
// or unsupported value is an error naming the field (memory_caching and generate_policy
// reference_generate: Unimplemented).
#include <string>

#include "engine/model/model_config.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/model_test_util.h"

namespace mcserve::engine {
namespace {

using testing::HasError;

constexpr char kSource[] = "/models/a/config.json";

// An armt config with the three required ARMT fields (BABILong's) and `extra`.
absl::StatusOr<ModelConfig> Parse(const std::string& extra) {
  return ParseModelConfig(R"({"model_type":"armt","num_mem_tokens":10,"d_mem":64,"segment_size":512)" +
                              (extra.empty() ? "" : "," + extra) + "}",
                          kSource);
}

TEST(ArmtConfigTest, DefaultsAreGpt2Small) {
  auto c = Parse("");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->family, ModelFamily::kArmt);
  EXPECT_EQ(c->vocab_size, 50257);
  EXPECT_EQ(c->hidden_size, 768);
  EXPECT_EQ(c->num_hidden_layers, 12);
  EXPECT_EQ(c->intermediate_size, 3072);
  EXPECT_FLOAT_EQ(c->norm_eps, 1e-5f);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->armt.n_positions, 1024);
  EXPECT_EQ(c->armt.num_heads, 12);
  EXPECT_EQ(c->armt.head_dim, 64);
  EXPECT_EQ(c->armt.segment_size, 512);
  EXPECT_EQ(c->armt.num_mem_tokens, 10);
  EXPECT_EQ(c->armt.d_mem, 64);
  EXPECT_EQ(c->armt.feat_dim, 384);
  EXPECT_FALSE(c->armt.wrap_pos.has_value());
  EXPECT_TRUE(c->armt.correction);
  EXPECT_EQ(c->max_positions(), 0);  // positions restart every segment
}

TEST(ArmtConfigTest, HfGpt2KeysAndOptions) {
  auto c = Parse(R"("n_ctx":1024,"resid_pdrop":0.1,"architectures":["GPT2LMHeadModel"],"n_inner":null,)"
                 R"("wrap_pos":true,"correction":false,"generate_policy":"streaming","segment_alignment":null,)"
                 R"("reorder_and_upcast_attn":true,"head_dim":64,"feat_dim":384)");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->armt.wrap_pos, true);
  EXPECT_FALSE(c->armt.correction);
  EXPECT_EQ(c->intermediate_size, 3072);
}

TEST(ArmtConfigTest, BadFieldsAreRejectedNamingTheField) {
  const absl::StatusCode bad = absl::StatusCode::kInvalidArgument;
  EXPECT_TRUE(HasError(Parse(R"("hidden_size":32)").status(), bad, {"hidden_size", "not an armt config field"}));
  EXPECT_TRUE(HasError(ParseModelConfig(R"({"model_type":"armt","d_mem":4,"segment_size":8})", kSource).status(),
                       bad, {"num_mem_tokens", "required"}));
  EXPECT_TRUE(HasError(Parse(R"("n_head":5)").status(), bad, {"n_head", "divide"}));
  EXPECT_TRUE(HasError(Parse(R"("n_embd":0)").status(), bad, {"n_embd", ">= 1"}));
  EXPECT_TRUE(HasError(Parse(R"("activation_function":"gelu")").status(), bad, {"activation_function"}));
  EXPECT_TRUE(HasError(Parse(R"("segment_alignment":"right")").status(), bad, {"segment_alignment"}));
  EXPECT_TRUE(HasError(Parse(R"("memory_insertion":"sequential")").status(), bad, {"memory_insertion"}));
  EXPECT_TRUE(HasError(Parse(R"("gating":true)").status(), bad, {"gating"}));
  EXPECT_TRUE(HasError(Parse(R"("use_denom":false)").status(), bad, {"use_denom"}));
  EXPECT_TRUE(HasError(Parse(R"("sliding_window":true)").status(), bad, {"sliding_window"}));
  EXPECT_TRUE(HasError(Parse(R"("tie_word_embeddings":false)").status(), bad, {"tie_word_embeddings"}));
  EXPECT_TRUE(HasError(Parse(R"("wrap_pos":1)").status(), bad, {"wrap_pos"}));
  EXPECT_TRUE(HasError(Parse(R"("layer_norm_epsilon":0)").status(), bad, {"layer_norm_epsilon"}));
  EXPECT_TRUE(HasError(Parse(R"("feat_dim":100)").status(), bad, {"feat_dim", "derived"}));
  EXPECT_TRUE(HasError(Parse(R"("n_positions":515)").status(), bad, {"segment_size", "n_positions"}));
  EXPECT_TRUE(Parse(R"("n_positions":515,"wrap_pos":true)").ok());  // memory rows past the table
  EXPECT_TRUE(HasError(Parse(R"("generate_policy":"reference_generate")").status(),
                       absl::StatusCode::kUnimplemented, {"generate_policy", "streaming"}));
  EXPECT_TRUE(HasError(Parse(R"("memory_caching":{"aggregation":"grm"})").status(),
                       absl::StatusCode::kUnimplemented, {"armt", "memory_caching"}));
}

}  // namespace
}  // namespace mcserve::engine

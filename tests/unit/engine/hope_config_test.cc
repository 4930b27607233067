// The `hope` config schema (docs/model-format.md, `hope`): defaults are the recommended resolutions of
// A1–A25, every allowed value of every choice parses, and an unknown key, a value outside the allowed
// set, a missing required key or a choice the engine does not run is an error naming the field.
#include <string>

#include "engine/model/model_config.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/model_test_util.h"

namespace mcserve::engine {
namespace {

using testing::HasError;

constexpr char kSource[] = "/models/h/config.json";
constexpr char kLevels[] = R"("cms_levels":[{"chunk_size":8,"intermediate_size":48},)"
                           R"({"chunk_size":16,"intermediate_size":32,"activation":"gelu","lr":0}])";

std::string Config(const std::string& extra = "") {
  std::string j = R"({"model_type":"hope","hidden_size":32,"num_hidden_layers":2,"num_heads":2,"head_dim":16,)"
                  R"("vocab_size":320,)" + std::string(kLevels);
  if (!extra.empty()) j += "," + extra;
  return j + "}";
}

ModelConfig MustParse(const std::string& json) {
  auto c = ParseModelConfig(json, kSource);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : ModelConfig{};
}

absl::Status ParseError(const std::string& json) { return ParseModelConfig(json, kSource).status(); }

TEST(HopeConfigTest, DefaultsAreTheRecommendedResolutions) {
  const ModelConfig c = MustParse(Config());
  EXPECT_EQ(c.family, ModelFamily::kHope);
  EXPECT_EQ(c.head_k_dim, 16);
  EXPECT_EQ(c.head_v_dim, 16);
  EXPECT_EQ(c.key_dim, 32);
  EXPECT_EQ(c.conv_size, 4);
  const HopeConfig& h = c.hope;
  EXPECT_EQ(h.memory_expansion, 2);
  EXPECT_EQ(h.chunk_size_other, 16);
  EXPECT_EQ(h.chunk_size_mem, 16);
  EXPECT_FALSE(h.memory_input_proj || h.scalar_memory_skip || h.eta_softplus || h.adaptive_q || h.w1_dgd_hidden ||
               h.read_after_write || h.readout_anchor || h.cms_adaptive || h.memory_gelu);
  EXPECT_TRUE(h.eta_clamp);
  EXPECT_TRUE(h.output_gate);
  EXPECT_EQ(h.momentum, HopeMomentumKind::kNone);
  EXPECT_DOUBLE_EQ(h.momentum_beta, 0.9);
  EXPECT_DOUBLE_EQ(h.grad_scale, 2.0);
  EXPECT_DOUBLE_EQ(h.eta_max, 1.0);
  ASSERT_EQ(h.cms_levels.size(), 2u);
  EXPECT_EQ(h.cms_levels[0].chunk_size, 8);
  EXPECT_EQ(h.cms_levels[0].intermediate_size, 48);
  EXPECT_TRUE(h.cms_levels[0].swiglu);
  EXPECT_EQ(h.cms_levels[0].lr, 0.0);
  EXPECT_FALSE(h.cms_levels[1].swiglu);
}

TEST(HopeConfigTest, EveryAllowedChoiceParses) {
  const ModelConfig c = MustParse(Config(
      R"("memory_input":"proj","scalar_memory_skip":"linear","eta_activation":"softplus","eta_scale":0.5,)"
      R"("eta_clamp":false,"adaptive_q":true,"w1_rule":"dgd_hidden","read_index":"after_write",)"
      R"("readout_mode":"A","momentum":"data","momentum_beta":0.5,"grad_scale":1,"output_gate":"rmsnorm",)"
      R"("memory_activation":"gelu","conv_size":2,"memory_expansion":3,"chunk_size_other":5,"chunk_size_mem":7,)"
      R"("chunk_anchor":"previous_chunk_end","conv_placement":"producers","cms_norm":"prenorm_residual",)"
      R"("cms_teach_signal":"per_layer_backward","cms_update_on_generated":false,"cms_update_terms":"chunk",)"
      R"("flush_partial_chunks":false,"multi_turn_positions":"continue","cms_state_scope":"request",)"
      R"("gate_granularity":"token","fast_weight_dtype":"float32","shared_values":false,)"
      R"("mixer":"self_modifying_titans","final_norm":true,"alpha_activation":"sigmoid","cms_adaptive":false,)"
      R"("tie_word_embeddings":true,"architectures":["HopeForCausalLM"])"));
  const HopeConfig& h = c.hope;
  EXPECT_TRUE(h.memory_input_proj && h.scalar_memory_skip && h.eta_softplus && h.adaptive_q && h.w1_dgd_hidden &&
              h.read_after_write && h.readout_anchor && h.memory_gelu);
  EXPECT_FALSE(h.eta_clamp || h.output_gate);
  EXPECT_EQ(h.momentum, HopeMomentumKind::kData);
  EXPECT_DOUBLE_EQ(h.eta_scale, 0.5);
  EXPECT_DOUBLE_EQ(h.momentum_beta, 0.5);
  EXPECT_EQ(c.conv_size, 2);
  EXPECT_EQ(h.memory_expansion, 3);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(MustParse(Config(R"("momentum":"constant")")).hope.momentum, HopeMomentumKind::kConstant);
  // null takes the default, as in the reference.
  EXPECT_EQ(MustParse(Config(R"("chunk_size_mem":null,"w1_rule":null)")).hope.chunk_size_mem, 16);
}

// memory_caching is parsed as for every family (docs/memory-caching.md); null or "none" turns it off.
TEST(HopeConfigTest, MemoryCachingIsParsed) {
  const ModelConfig c = MustParse(Config(R"("memory_caching":{"aggregation":"soup","segment_size":8})"));
  ASSERT_TRUE(c.memory_caching.has_value());
  EXPECT_EQ(c.memory_caching->aggregation, McAggregation::kSoup);
  EXPECT_EQ(c.memory_caching->segment_size, 8);
  EXPECT_FALSE(MustParse(Config(R"("memory_caching":null)")).memory_caching.has_value());
  // Not defined with the adaptive CMS (as the reference).
  EXPECT_TRUE(HasError(ParseError(Config(R"("cms_adaptive":true,"memory_caching":{"aggregation":"grm"})")),
                       absl::StatusCode::kUnimplemented, {kSource, "memory_caching", "cms_adaptive"}));
}

TEST(HopeConfigTest, EveryBadValueNamesItsField) {
  const std::pair<std::string, std::string> cases[] = {
      {R"("hidden_ratio":4)", "hidden_ratio"},
      {R"("memory_caching":{"aggregation":"mean","segmentation":"logarithmic"})", "memory_caching"},
      {R"("memory_input":"slices")", "memory_input"},
      {R"("scalar_memory_skip":"mlp")", "scalar_memory_skip"},
      {R"("eta_activation":"relu")", "eta_activation"},
      {R"("eta_max":0)", "eta_max"},
      {R"("alpha_activation":"softplus")", "alpha_activation"},
      {R"("eta_clamp":1)", "eta_clamp"},
      {R"("w1_rule":"dgd")", "w1_rule"},
      {R"("read_index":"t")", "read_index"},
      {R"("chunk_anchor":"current_chunk_end")", "chunk_anchor"},
      {R"("readout_mode":"B")", "readout_mode"},
      {R"("momentum":"nesterov")", "momentum"},
      {R"("momentum_beta":1.0)", "momentum_beta"},
      {R"("grad_scale":0)", "grad_scale"},
      {R"("conv_placement":"input")", "conv_placement"},
      {R"("output_gate":"sigmoid")", "output_gate"},
      {R"("cms_norm":"none")", "cms_norm"},
      {R"("cms_teach_signal":"global")", "cms_teach_signal"},
      {R"("cms_update_on_generated":true)", "cms_update_on_generated"},
      {R"("cms_update_terms":"chunk_plus_one")", "cms_update_terms"},
      {R"("flush_partial_chunks":true)", "flush_partial_chunks"},
      {R"("multi_turn_positions":"reset")", "multi_turn_positions"},
      {R"("cms_state_scope":"tenant")", "cms_state_scope"},
      {R"("gate_granularity":"chunk")", "gate_granularity"},
      {R"("memory_activation":"relu")", "memory_activation"},
      {R"("fast_weight_dtype":"bfloat16")", "fast_weight_dtype"},
      {R"("shared_values":true)", "shared_values"},
      {R"("mixer":"attention")", "mixer"},
      {R"("final_norm":false)", "final_norm"},
      {R"("conv_size":0)", "conv_size"},
      {R"("memory_expansion":0)", "memory_expansion"},
      {R"("chunk_size_other":0)", "chunk_size_other"},
      {R"("chunk_size_mem":-2)", "chunk_size_mem"},
      {R"("head_dim":8)", "memory_input"},  // slice needs hidden = heads · head_dim
  };
  for (const auto& [extra, field] : cases) {
    EXPECT_TRUE(HasError(ParseError(Config(extra)), absl::StatusCode::kInvalidArgument, {kSource, field})) << extra;
  }
}

TEST(HopeConfigTest, CmsLevelsAndRequiredKeys) {
  const std::string head = R"({"model_type":"hope","hidden_size":32,"num_hidden_layers":2,"num_heads":2,)"
                           R"("head_dim":16,"vocab_size":320)";
  const std::pair<std::string, std::string> cases[] = {
      {head + "}", "cms_levels"},
      {head + R"(,"cms_levels":[]})", "cms_levels"},
      {head + R"(,"cms_levels":[{"chunk_size":4}]})", "cms_levels[0].intermediate_size"},
      {head + R"(,"cms_levels":[{"chunk_size":0,"intermediate_size":8}]})", "cms_levels[0].chunk_size"},
      {head + R"(,"cms_levels":[{"chunk_size":4,"intermediate_size":8,"lr":-1}]})", "cms_levels[0].lr"},
      {head + R"(,"cms_levels":[{"chunk_size":4,"intermediate_size":8},{"chunk_size":4,"intermediate_size":8,)"
                  R"("activation":"relu"}]})",
       "cms_levels[1]"},
      {head + R"(,"cms_levels":[{"chunk_size":4,"intermediate_size":8,"period":3}]})", "period"},
      {head + R"(,"cms_levels":[7]})", "cms_levels[0]"},
      {R"({"model_type":"hope","hidden_size":32,"num_hidden_layers":2,"num_heads":2,"vocab_size":320,)" +
           std::string(kLevels) + "}",
       "head_dim"},
  };
  for (const auto& [json, field] : cases) {
    EXPECT_TRUE(HasError(ParseError(json), absl::StatusCode::kInvalidArgument, {kSource, field})) << json;
  }
}

TEST(HopeConfigTest, AdaptiveCmsIsServed) {
  const std::string head = R"({"model_type":"hope","hidden_size":32,"num_hidden_layers":2,"num_heads":2,)"
                           R"("head_dim":16,"vocab_size":320,"cms_adaptive":true,)";
  const std::string levels = R"("cms_levels":[{"chunk_size":4,"intermediate_size":8,"lr":0.5},)"
                             R"({"chunk_size":6,"intermediate_size":8}]})";
  const ModelConfig c = MustParse(head + levels);
  EXPECT_TRUE(c.hope.AdaptiveCms());
  EXPECT_TRUE(c.hope.Adapts(c.hope.cms_levels[0]));
  EXPECT_FALSE(c.hope.Adapts(c.hope.cms_levels[1]));  // lr 0: static
  EXPECT_TRUE(MustParse(head + R"("adaptive_q":true,)" + levels).hope.AdaptiveCms());
  // With every lr 0 the adaptive model is the static one.
  const ModelConfig still = MustParse(Config(R"("cms_adaptive":true)"));
  EXPECT_TRUE(still.hope.cms_adaptive);
  EXPECT_FALSE(still.hope.AdaptiveCms());
}

}  // namespace
}  // namespace mcserve::engine

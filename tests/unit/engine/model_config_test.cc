#include "engine/model/model_config.h"

#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "tests/unit/engine/model_test_util.h"

namespace mcserve::engine {
namespace {

using testing::HasError;
using testing::TempDir;
using testing::WriteFile;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
constexpr char kSource[] = "/models/x/config.json";

ModelConfig MustParse(const std::string& json) {
  auto c = ParseModelConfig(json, kSource);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : ModelConfig{};
}

absl::Status ParseError(const std::string& json) { return ParseModelConfig(json, kSource).status(); }

TEST(ModelConfigTest, GatedDeltaNetDefaults) {
  ModelConfig c = MustParse(R"({"model_type":"gated_deltanet"})");
  EXPECT_EQ(c.family, ModelFamily::kGatedDeltaNet);
  EXPECT_EQ(c.model_type, "gated_deltanet");
  EXPECT_EQ(c.vocab_size, 32000);
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.num_hidden_layers, 21);
  EXPECT_EQ(c.num_heads, 6);
  EXPECT_EQ(c.num_kv_heads, 6);
  EXPECT_EQ(c.num_v_heads, 6);
  EXPECT_EQ(c.head_k_dim, 256);
  EXPECT_EQ(c.head_v_dim, 512);  // int(256 · expand_v 2.0)
  EXPECT_EQ(c.key_dim, 6 * 256);
  EXPECT_EQ(c.value_dim, 6 * 512);
  EXPECT_EQ(c.intermediate_size, 5632);  // 256·ceil(int(2048·4·2/3)/256)
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-6f);
  EXPECT_TRUE(c.use_gate);
  EXPECT_TRUE(c.use_short_conv);
  EXPECT_EQ(c.conv_size, 4);
  EXPECT_FALSE(c.allow_neg_eigval);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_id, 2);
  EXPECT_EQ(c.qk_norm, QkNorm::kL2);
}

TEST(ModelConfigTest, GatedDeltaNetFlame340MAndGva) {
  ModelConfig c = MustParse(
      R"({"model_type":"gated_deltanet","hidden_size":1024,"head_dim":256,"num_heads":6,"expand_v":2,
          "num_hidden_layers":21,"use_gate":true,"conv_size":4,"num_v_heads":null})");
  EXPECT_EQ(c.intermediate_size, 2816);
  EXPECT_EQ(c.num_v_heads, 6);
  ModelConfig g = MustParse(
      R"({"model_type":"gated_deltanet","hidden_size":32,"head_dim":16,"num_heads":2,"num_v_heads":4,
          "expand_v":1.0,"allow_neg_eigval":true,"use_gate":false,"hidden_ratio":2})");
  EXPECT_EQ(g.num_v_heads, 4);
  EXPECT_EQ(g.key_dim, 32);
  EXPECT_EQ(g.value_dim, 64);
  EXPECT_TRUE(g.allow_neg_eigval);
  EXPECT_FALSE(g.use_gate);
  EXPECT_EQ(g.intermediate_size, 256);  // int(32·2·2/3) = 42 → 256
  EXPECT_TRUE(HasError(ParseError(R"({"model_type":"gated_deltanet","num_heads":4,"num_v_heads":6})"), kInvalid,
                       {kSource, "num_v_heads", "multiple", "num_heads"}));
  EXPECT_TRUE(HasError(ParseError(R"({"model_type":"gated_deltanet","head_dim":10,"expand_v":0.75})"), kInvalid,
                       {kSource, "expand_v", "integer"}));
}

TEST(ModelConfigTest, GlaDefaultsAndHubConfig) {
  ModelConfig c = MustParse(R"({"model_type":"gla"})");
  EXPECT_EQ(c.family, ModelFamily::kGla);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.key_dim, 1024);  // int(2048 · 0.5)
  EXPECT_EQ(c.head_k_dim, 256);
  EXPECT_EQ(c.value_dim, 2048);
  EXPECT_EQ(c.head_v_dim, 512);
  EXPECT_EQ(c.num_hidden_layers, 24);
  EXPECT_TRUE(c.use_output_gate);
  EXPECT_FALSE(c.use_short_conv);
  EXPECT_EQ(c.feature_map, FeatureMapType::kIdentity);
  EXPECT_FALSE(c.clamp_min.has_value());
  EXPECT_EQ(c.gate_low_rank_dim, 16);
  EXPECT_FLOAT_EQ(c.gate_logit_normalizer, 16.f);
  // fla-hub/gla-340M-15B.
  ModelConfig hub = MustParse(
      R"({"model_type":"gla","hidden_size":1024,"num_heads":4,"num_hidden_layers":24,"expand_k":0.5,
          "tie_word_embeddings":true,"use_short_conv":false,"attn":null,"fuse_norm":true})");
  EXPECT_EQ(hub.head_k_dim, 128);
  EXPECT_EQ(hub.head_v_dim, 256);
  EXPECT_TRUE(hub.tie_word_embeddings);
  EXPECT_EQ(hub.intermediate_size, 2816);
}

TEST(ModelConfigTest, GlaOptions) {
  ModelConfig c = MustParse(
      R"({"model_type":"gla","hidden_size":32,"num_heads":2,"num_kv_heads":1,"clamp_min":-0.06,
          "feature_map":"relu","use_output_gate":false,"use_short_conv":true,"conv_size":3})");
  ASSERT_TRUE(c.clamp_min.has_value());
  EXPECT_FLOAT_EQ(*c.clamp_min, -0.06f);
  EXPECT_EQ(c.feature_map, FeatureMapType::kRelu);
  EXPECT_FALSE(c.use_output_gate);
  EXPECT_TRUE(c.use_short_conv);
  EXPECT_EQ(c.conv_size, 3);
  EXPECT_EQ(c.num_kv_heads, 1);
  EXPECT_EQ(c.key_dim, 16);
  EXPECT_EQ(c.head_k_dim, 8);
  EXPECT_TRUE(HasError(ParseError(R"({"model_type":"gla","num_heads":4,"num_kv_heads":3})"), kInvalid,
                       {kSource, "num_kv_heads", "divide"}));
  EXPECT_TRUE(HasError(ParseError(R"({"model_type":"gla","feature_map":"performer"})"), kInvalid,
                       {kSource, "feature_map", "performer"}));
  EXPECT_TRUE(HasError(ParseError(R"({"model_type":"gla","clamp_min":"low"})"), kInvalid,
                       {kSource, "clamp_min", "number"}));
}

TEST(ModelConfigTest, NormEpsAndLegacyRmsNormEps) {
  EXPECT_FLOAT_EQ(MustParse(R"({"model_type":"gla","rms_norm_eps":1e-5})").norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(MustParse(R"({"model_type":"gla","rms_norm_eps":1e-5,"norm_eps":1e-6})").norm_eps, 1e-6f);
  EXPECT_TRUE(HasError(ParseError(R"({"model_type":"gla","norm_eps":0})"), kInvalid, {kSource, "norm_eps"}));
}

TEST(ModelConfigTest, LinearAttnFeatureMaps) {
  ModelConfig c = MustParse(R"({"model_type":"linear_attn"})");
  EXPECT_EQ(c.family, ModelFamily::kLinearAttn);
  EXPECT_EQ(c.feature_map, FeatureMapType::kHadamard);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.key_dim, 2048);
  EXPECT_EQ(c.head_k_dim, 512);
  EXPECT_EQ(c.head_v_dim, 512);
  EXPECT_FALSE(c.norm_feature_map);
  const std::pair<const char*, FeatureMapType> cases[] = {
      {"elementwise_product", FeatureMapType::kHadamard}, {"hedgehog", FeatureMapType::kHedgehog},
      {"t2r", FeatureMapType::kT2R}, {"dpfp", FeatureMapType::kDpfp}, {"elu", FeatureMapType::kElu},
      {"relu", FeatureMapType::kRelu}, {"identity", FeatureMapType::kIdentity}};
  for (const auto& [name, type] : cases) {
    ModelConfig m = MustParse(std::string(R"({"model_type":"linear_attn","feature_map":")") + name + "\"}");
    EXPECT_EQ(m.feature_map, type) << name;
  }
  ModelConfig d = MustParse(
      R"({"model_type":"linear_attn","hidden_size":32,"num_heads":2,"expand_k":0.5,"feature_map":"dpfp",
          "norm_q":true,"norm_k":true,"norm_feature_map":true,"tie_feature_map_qk":true,"num_kv_heads":1})");
  EXPECT_EQ(d.head_k_dim, 8);
  EXPECT_EQ(d.head_v_dim, 16);
  EXPECT_TRUE(d.norm_q && d.norm_k && d.norm_feature_map && d.tie_feature_map_qk);
  EXPECT_EQ(d.num_kv_heads, 1);
  EXPECT_TRUE(HasError(ParseError(R"({"model_type":"linear_attn","feature_map":"cosformer"})"), kInvalid,
                       {kSource, "feature_map", "cosformer"}));
  EXPECT_TRUE(HasError(ParseError(R"({"model_type":"linear_attn","hidden_size":30,"num_heads":4})"), kInvalid,
                       {kSource, "key_dim", "num_heads"}));
}

TEST(ModelConfigTest, DeltaNet) {
  ModelConfig c = MustParse(R"({"model_type":"delta_net"})");
  EXPECT_EQ(c.family, ModelFamily::kDeltaNet);
  EXPECT_EQ(c.num_heads, 16);
  EXPECT_EQ(c.head_k_dim, 128);
  EXPECT_EQ(c.head_v_dim, 128);
  EXPECT_EQ(c.key_dim, 2048);
  EXPECT_TRUE(c.use_short_conv);
  EXPECT_TRUE(c.use_beta);
  EXPECT_FALSE(c.use_gate);
  EXPECT_EQ(c.qk_activation, FeatureMapType::kSilu);
  EXPECT_EQ(c.qk_norm, QkNorm::kL2);
  ModelConfig v = MustParse(
      R"({"model_type":"delta_net","hidden_size":32,"num_heads":2,"use_gate":true,"qk_activation":"elu",
          "qk_norm":"sum","use_short_conv":false,"allow_neg_eigval":true,"use_beta":false})");
  EXPECT_TRUE(v.use_gate);
  EXPECT_EQ(v.qk_activation, FeatureMapType::kElu);
  EXPECT_EQ(v.qk_norm, QkNorm::kSum);
  EXPECT_FALSE(v.use_short_conv);
  EXPECT_TRUE(v.allow_neg_eigval);
  EXPECT_FALSE(v.use_beta);
  EXPECT_EQ(v.head_k_dim, 16);
  EXPECT_TRUE(HasError(ParseError(R"({"model_type":"delta_net","qk_norm":"l1"})"), kInvalid,
                       {kSource, "qk_norm", "l1"}));
  EXPECT_TRUE(HasError(ParseError(R"({"model_type":"delta_net","qk_activation":"gelu"})"), kInvalid,
                       {kSource, "qk_activation", "gelu"}));
}

TEST(ModelConfigTest, SwlaAndTitans) {
  const std::string common = R"("hidden_size":32,"num_heads":2,"head_dim":16,"num_hidden_layers":2,)";
  ModelConfig s = MustParse("{" + common + R"("model_type":"swla"})");
  EXPECT_EQ(s.family, ModelFamily::kSwla);
  EXPECT_EQ(s.head_k_dim, 16);
  EXPECT_EQ(s.head_v_dim, 16);  // expand_v defaults to 1.0 for mcserve families
  EXPECT_EQ(s.value_dim, 32);
  EXPECT_EQ(s.num_v_heads, 2);
  EXPECT_TRUE(s.use_gate);
  EXPECT_TRUE(s.use_short_conv);
  ModelConfig t = MustParse("{" + common + R"("model_type":"titans","use_gate":false,"memory_depth":1})");
  EXPECT_EQ(t.family, ModelFamily::kTitans);
  EXPECT_EQ(t.memory_depth, 1);
  EXPECT_FALSE(t.use_gate);
  EXPECT_FALSE(t.deep_memory());
}

TEST(ModelConfigTest, DeepMemories) {
  const std::string common = R"("hidden_size":32,"num_heads":2,"head_dim":16,"num_hidden_layers":2,)";
  ModelConfig t = MustParse("{" + common + R"("model_type":"titans","memory_depth":2})");
  EXPECT_TRUE(t.deep_memory());
  EXPECT_EQ(t.memory_expansion, 4);
  EXPECT_FALSE(t.memory_layer_norm);
  EXPECT_EQ(t.inner_chunk_size, 1);
  ModelConfig d = MustParse("{" + common + R"("model_type":"dla","memory_expansion":2,"memory_layer_norm":true,)"
                                           R"("inner_chunk_size":4})");
  EXPECT_EQ(d.family, ModelFamily::kDla);
  EXPECT_EQ(d.memory_depth, 2);
  EXPECT_EQ(d.memory_expansion, 2);
  EXPECT_TRUE(d.memory_layer_norm);
  EXPECT_EQ(d.inner_chunk_size, 4);
  EXPECT_TRUE(HasError(ParseError("{" + common + R"("model_type":"titans","memory_depth":3})"), kInvalid,
                       {kSource, "memory_depth", "3"}));
  EXPECT_TRUE(HasError(ParseError("{" + common + R"("model_type":"dla","memory_depth":1})"), kInvalid,
                       {kSource, "dla", "memory_depth"}));
  EXPECT_TRUE(HasError(ParseError("{" + common + R"("model_type":"dla","expand_v":2})"), kInvalid,
                       {kSource, "head_v", "expand_v"}));
  EXPECT_TRUE(HasError(ParseError("{" + common + R"("model_type":"dla","inner_chunk_size":0})"), kInvalid,
                       {kSource, "inner_chunk_size"}));
  EXPECT_TRUE(HasError(ParseError("{" + common + R"("model_type":"dla","memory_expansion":-1})"), kInvalid,
                       {kSource, "memory_expansion"}));
  EXPECT_TRUE(HasError(ParseError("{" + common + R"("model_type":"dla","memory_layer_norm":1})"), kInvalid,
                       {kSource, "memory_layer_norm"}));
}

// lattice (docs/model-format.md): the defaults are the spec's recommendations (A.9), every other value of
// an A.9 field is an error naming it.
TEST(ModelConfigTest, Lattice) {
  const std::string common = R"("model_type":"lattice","hidden_size":32,"num_heads":2,"num_hidden_layers":2)";
  ModelConfig d = MustParse("{" + common + R"(,"head_dim":16})");
  EXPECT_EQ(d.family, ModelFamily::kLattice);
  EXPECT_EQ(d.head_v_dim, 16);
  EXPECT_EQ(d.head_k_dim, 16);  // num_slots defaults to head_dim
  EXPECT_EQ(d.key_dim, 32);
  EXPECT_EQ(d.value_dim, 32);
  EXPECT_EQ(d.lattice.variant, LatticeVariant::kDec);
  EXPECT_TRUE(d.lattice.shared_qk);
  EXPECT_FALSE(d.lattice.conv_silu);
  EXPECT_FALSE(d.lattice.qk_l2);
  EXPECT_TRUE(d.lattice.use_forget_gate);
  EXPECT_FALSE(d.lattice.use_output_norm);
  EXPECT_EQ(d.lattice.initial_state, LatticeInit::kAuto);
  EXPECT_FALSE(d.lattice.analytic_renorm);
  EXPECT_FALSE(d.lattice.normalized_readout);
  EXPECT_TRUE(d.use_gate);
  EXPECT_TRUE(d.use_short_conv);
  EXPECT_EQ(d.conv_size, 4);
  ModelConfig e = MustParse("{" + common + R"(,"head_dim":16,"num_slots":8,"lattice_variant":"sim",)"
                                           R"("qk_projection":"separate","conv_activation":"silu","qk_norm":"l2",)"
                                           R"("use_forget_gate":false,"use_output_norm":true,)"
                                           R"("initial_state":"identity","state_renorm":"analytic",)"
                                           R"("readout":"normalized","state_soft_threshold":0})");
  EXPECT_EQ(e.head_k_dim, 8);
  EXPECT_EQ(e.lattice.variant, LatticeVariant::kSim);
  EXPECT_FALSE(e.lattice.shared_qk);
  EXPECT_TRUE(e.lattice.conv_silu && e.lattice.qk_l2 && e.lattice.use_output_norm);
  EXPECT_FALSE(e.lattice.use_forget_gate);
  EXPECT_EQ(e.lattice.initial_state, LatticeInit::kIdentity);
  EXPECT_TRUE(e.lattice.analytic_renorm && e.lattice.normalized_readout);
  for (const char* field : {"lattice_variant", "qk_projection", "conv_activation", "qk_norm", "initial_state",
                            "state_renorm", "readout"}) {
    EXPECT_TRUE(HasError(ParseError("{" + common + ",\"" + field + "\":\"bogus\"}"), kInvalid,
                         {kSource, field, "bogus"}));
  }
  EXPECT_TRUE(HasError(ParseError("{" + common + R"(,"state_soft_threshold":0.1})"), kInvalid,
                       {kSource, "state_soft_threshold"}));
  EXPECT_TRUE(HasError(ParseError("{" + common + R"(,"head_dim":8,"num_slots":9})"), kInvalid, {kSource, "num_slots"}));
  EXPECT_TRUE(HasError(ParseError("{" + common + R"(,"use_forget_gate":"yes"})"), kInvalid,
                       {kSource, "use_forget_gate"}));
}

TEST(ModelConfigTest, RejectsHybridAttention) {
  EXPECT_TRUE(HasError(ParseError(R"({"model_type":"gated_deltanet","attn":{"layers":[1],"num_heads":4}})"),
                       absl::StatusCode::kUnimplemented, {kSource, "hybrid attention layers are not supported", "attn"}));
  EXPECT_TRUE(HasError(ParseError(R"({"model_type":"gla","attnres_block_size":4})"),
                       absl::StatusCode::kUnimplemented, {kSource, "hybrid", "attnres_block_size"}));
  EXPECT_TRUE(ParseModelConfig(R"({"model_type":"gla","attn":null,"attnres_block_size":null})", kSource).ok());
}

TEST(ModelConfigTest, RejectsWrongJsonTypes) {
  EXPECT_TRUE(HasError(ParseError(R"({"model_type":"gla","hidden_size":"1024"})"), kInvalid,
                       {kSource, "\"hidden_size\"", "integer", "string"}));
  EXPECT_TRUE(HasError(ParseError(R"({"model_type":"gla","num_heads":4.0})"), kInvalid,
                       {kSource, "\"num_heads\"", "integer"}));
  EXPECT_TRUE(HasError(ParseError(R"({"model_type":"delta_net","use_gate":1})"), kInvalid,
                       {kSource, "\"use_gate\"", "true or false"}));
  EXPECT_TRUE(HasError(ParseError(R"({"model_type":"gla","expand_k":"0.5"})"), kInvalid,
                       {kSource, "\"expand_k\"", "number"}));
  EXPECT_TRUE(HasError(ParseError(R"({"model_type":7})"), kInvalid, {kSource, "\"model_type\"", "string"}));
  EXPECT_TRUE(HasError(ParseError(R"({"model_type":"gla","tie_word_embeddings":"yes"})"), kInvalid,
                       {kSource, "tie_word_embeddings"}));
}

TEST(ModelConfigTest, RejectsUnknownOrMissingModelType) {
  EXPECT_TRUE(HasError(ParseError(R"({"model_type":"mamba2"})"), kInvalid,
                       {kSource, "\"mamba2\"", "linear_attn", "gla", "delta_net", "gated_deltanet", "swla", "titans"}));
  EXPECT_TRUE(HasError(ParseError(R"({"hidden_size":32})"), kInvalid, {kSource, "model_type"}));
}

TEST(ModelConfigTest, RejectsNonPositiveSizes) {
  for (const char* key : {"vocab_size", "hidden_size", "num_hidden_layers", "num_heads"}) {
    EXPECT_TRUE(HasError(ParseError(std::string(R"({"model_type":"gla",")") + key + "\":0}"), kInvalid,
                         {kSource, key, "positive"}))
        << key;
  }
  EXPECT_TRUE(HasError(ParseError(R"({"model_type":"gla","intermediate_size":-4})"), kInvalid,
                       {"intermediate_size"}));
  EXPECT_TRUE(HasError(ParseError(R"({"model_type":"gla","vocab_size":100,"eos_token_id":100})"), kInvalid,
                       {"eos_token_id", "100"}));
}

TEST(ModelConfigTest, RejectsNonFlaGlaSchema) {
  EXPECT_TRUE(HasError(ParseError(R"({"model_type":"gla","d_model":1024,"n_head":4,"n_layer":24,"bos_token_id":0})"),
                       kInvalid, {kSource, "d_model", "hidden_size", "fla"}));
}

TEST(ModelConfigTest, RejectsNonJsonAndNonObject) {
  EXPECT_TRUE(HasError(ParseError("{model_type: gla}"), kInvalid, {kSource, "JSON"}));
  EXPECT_TRUE(HasError(ParseError("[1,2]"), kInvalid, {kSource, "object"}));
}

TEST(ModelConfigTest, LoadFromDirectory) {
  TempDir dir;
  EXPECT_TRUE(HasError(LoadModelConfig(dir.path()).status(), absl::StatusCode::kNotFound,
                       {dir.File("config.json")}));
  WriteFile(dir.File("config.json"), R"({"model_type":"swla","hidden_size":"big"})");
  EXPECT_TRUE(HasError(LoadModelConfig(dir.path()).status(), kInvalid, {dir.File("config.json"), "hidden_size"}));
  WriteFile(dir.File("config.json"), R"({"model_type":"swla","hidden_size":64,"num_heads":4,"head_dim":16})");
  auto c = LoadModelConfig(dir.path());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->key_dim, 64);
}

// The committed fixtures resolve to the dimensions tests/reference/README.md documents.
TEST(ModelConfigTest, FixtureConfigs) {
  const std::filesystem::path root = std::filesystem::path(MCSERVE_TEST_DATA_DIR) / "models";
  if (!std::filesystem::exists(root / "gla")) GTEST_SKIP() << "fixtures not present";
  auto gla = LoadModelConfig((root / "gla").string());
  ASSERT_TRUE(gla.ok()) << gla.status();
  EXPECT_EQ(gla->head_k_dim, 8);
  EXPECT_TRUE(gla->use_output_gate);
  auto tied = LoadModelConfig((root / "gla_conv_tied").string());
  ASSERT_TRUE(tied.ok()) << tied.status();
  EXPECT_FLOAT_EQ(tied->norm_eps, 1e-5f);
  ASSERT_TRUE(tied->clamp_min.has_value());
  EXPECT_FLOAT_EQ(*tied->clamp_min, -0.06f);
  EXPECT_TRUE(tied->tie_word_embeddings);
  auto gva = LoadModelConfig((root / "gated_deltanet_gva_bf16").string());
  ASSERT_TRUE(gva.ok()) << gva.status();
  EXPECT_EQ(gva->value_dim, 64);
  EXPECT_EQ(gva->intermediate_size, 256);
}

}  // namespace
}  // namespace mcserve::engine

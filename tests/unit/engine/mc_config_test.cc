// Memory Caching configuration: config.json's memory_caching object and command-line overrides.
#include "engine/mc/mc_config.h"

#include "engine/model/model_config.h"
#include "gtest/gtest.h"

namespace mcserve::engine {
namespace {

TEST(McConfigTest, DefaultsFollowTheSpecResolutions) {
  auto c = ParseMcConfig("{}", "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->has_value());
  const McConfig& mc = **c;
  EXPECT_EQ(mc.aggregation, McAggregation::kGrm);
  EXPECT_EQ(mc.segmentation, McSegmentation::kConstant);
  EXPECT_EQ(mc.segment_size, 256);
  EXPECT_EQ(mc.init_mode, McInitMode::kIndependent);
  EXPECT_FALSE(mc.gate.has_value());
  EXPECT_EQ(mc.pool, McPool::kMean);
  EXPECT_EQ(mc.top_k, 2);
  EXPECT_TRUE(mc.AppliesTo(7));
  EXPECT_FALSE(mc.SwlaCrossBoundary());
}

TEST(McConfigTest, ParsesEveryField) {
  auto c = ParseMcConfig(R"({"aggregation": "ssc", "segmentation": "logarithmic", "segment_size": 64,
      "init_mode": "checkpoint", "gate": "u_proj", "pool": "sum", "top_k": 4, "mean_combine": "average",
      "layers": [0, 2], "swla_cross_boundary": false})", "m/config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  const McConfig& mc = **c;
  EXPECT_EQ(mc.aggregation, McAggregation::kSsc);
  EXPECT_EQ(mc.segmentation, McSegmentation::kLogarithmic);
  EXPECT_EQ(mc.segment_size, 64);
  EXPECT_EQ(mc.init_mode, McInitMode::kCheckpoint);
  EXPECT_EQ(mc.gate, McGate::kUProj);
  EXPECT_EQ(mc.pool, McPool::kSum);
  EXPECT_EQ(mc.top_k, 4);
  EXPECT_EQ(mc.mean_combine, McMeanCombine::kAverage);
  EXPECT_TRUE(mc.AppliesTo(2));
  EXPECT_FALSE(mc.AppliesTo(1));
  EXPECT_FALSE(mc.SwlaCrossBoundary());
}

TEST(McConfigTest, NoneAndNullTurnItOff) {
  EXPECT_FALSE(ParseMcConfig("null", "c")->has_value());
  EXPECT_FALSE(ParseMcConfig(R"({"aggregation": "none"})", "c")->has_value());
}

TEST(McConfigTest, BadFieldsNameTheFieldAndFile) {
  struct Case { const char* json; const char* fragment; };
  for (const Case& k : {Case{R"({"aggregation": "attention"})", "memory_caching.aggregation"},
                        Case{R"({"segment_size": 0})", "memory_caching.segment_size"},
                        Case{R"({"segment_size": "big"})", "memory_caching.segment_size"},
                        Case{R"({"layers": ["x"]})", "memory_caching.layers"},
                        Case{R"({"top_kk": 2})", "memory_caching.top_kk"},
                        Case{R"({"aggregation": "mean", "segmentation": "logarithmic"})", "needs constant"},
                        Case{R"([1, 2])", "must be an object"}}) {
    auto c = ParseMcConfig(k.json, "dir/config.json");
    ASSERT_FALSE(c.ok()) << k.json;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(c.status().message().find(k.fragment), std::string::npos) << c.status();
    EXPECT_NE(c.status().message().find("dir/config.json"), std::string::npos) << c.status();
  }
}

TEST(McConfigTest, OverridesApplyMcToAModelWithoutIt) {
  auto c = ApplyMcOverrides(std::nullopt, {{"aggregation", "ssc"}, {"segment_size", "64"}, {"top_k", "2"}});
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->has_value());
  EXPECT_EQ((*c)->aggregation, McAggregation::kSsc);
  EXPECT_EQ((*c)->segment_size, 64);
  EXPECT_EQ(DescribeMcConfig(**c), "ssc top-2, constant segments of 64, independent, gate auto, mean pool");
}

TEST(McConfigTest, OverridesChangeOrDisableTheModelsSetting) {
  McConfig base;
  base.aggregation = McAggregation::kGrm;
  auto changed = ApplyMcOverrides(base, {{"layers", "1,3"}, {"init_mode", "checkpoint"}});
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ((*changed)->aggregation, McAggregation::kGrm);
  EXPECT_EQ((*changed)->init_mode, McInitMode::kCheckpoint);
  EXPECT_TRUE((*changed)->AppliesTo(3));
  EXPECT_FALSE((*changed)->AppliesTo(2));
  auto off = ApplyMcOverrides(base, {{"aggregation", "none"}});
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->has_value());
  auto bad = ApplyMcOverrides(base, {{"pool", "max"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--mc-pool"), std::string::npos) << bad.status();
}

TEST(McConfigTest, ModelConfigCarriesTheObject) {
  auto c = ParseModelConfig(R"({"model_type": "gated_deltanet", "hidden_size": 32, "num_hidden_layers": 2,
      "num_heads": 2, "head_dim": 16, "vocab_size": 100, "memory_caching": {"aggregation": "residual"}})",
                            "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->memory_caching.has_value());
  EXPECT_EQ(c->memory_caching->aggregation, McAggregation::kResidual);
}

}  // namespace
}  // namespace mcserve::engine

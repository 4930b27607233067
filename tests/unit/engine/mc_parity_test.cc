// Memory Caching against the PyTorch reference: every variant of tests/data/mc/<base>/variants.json
// (aggregation × init mode × segmentation, pools, per-layer, top-k), applied after training to a
// base fixture through the same overrides mcserve-run's --mc-* flags use. Each variant's prompt
// logits, chunked prefill across segment boundaries and greedy continuation must match.
#include <ostream>
#include <fstream>

#include "engine/runner/model.h"
#include "fixture_util.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/reference_generate.h"
#include "nlohmann/json.hpp"

namespace mcserve::engine {
namespace {

using testing::Generate;
using testing::GenerateOptions;
using testing::RelativeError;

constexpr double kLogitTolerance = 1e-4;  // relative, fp32

struct Variant {
  std::string base, name;
  std::map<std::string, std::string> overrides;
  std::vector<int32_t> greedy_ids;
};

std::string DataDir() { return std::string(MCSERVE_TEST_DATA_DIR) + "/mc"; }

std::vector<Variant> LoadVariants() {
  std::vector<Variant> out;
  for (const char* base :
       {"gated_deltanet", "linear_attn_identity", "titans_mlp", "dla", "lattice", "lattice_enc", "hope"}) {
    std::ifstream f(DataDir() + "/" + base + "/variants.json");
    const nlohmann::json list = nlohmann::json::parse(f);
    for (const auto& v : list) {
      Variant variant{.base = base, .name = v["name"]};
      for (const auto& [field, value] : v["memory_caching"].items()) {
        if (value.is_string()) {
          variant.overrides[field] = value.get<std::string>();
        } else if (value.is_boolean()) {
          variant.overrides[field] = value.get<bool>() ? "true" : "false";
        } else if (value.is_array()) {
          std::string layers;
          for (const auto& l : value) layers += (layers.empty() ? "" : ",") + std::to_string(l.get<int>());
          variant.overrides[field] = layers;
        } else {
          variant.overrides[field] = std::to_string(value.get<int64_t>());
        }
      }
      variant.greedy_ids = v["greedy_ids"].get<std::vector<int32_t>>();
      out.push_back(std::move(variant));
    }
  }
  return out;
}

// A failing case names its variant (not its bytes).
void PrintTo(const Variant& c, std::ostream* os) { *os << c.base << "_" << c.name; }

class McParityTest : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    const Variant& v = GetParam();
    auto m = Model::Load(testing::FixtureDir(v.base), {.num_threads = 2, .mc_overrides = v.overrides});
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
    ASSERT_TRUE(model_->config().memory_caching.has_value());
    prompt_ = testing::LoadGolden(v.base).prompt_ids;
    auto file = SafetensorsFile::Open(DataDir() + "/" + v.base + "/" + v.name + ".safetensors");
    ASSERT_TRUE(file.ok()) << file.status();
    logits_ = testing::ReadEntry<float>(**file, "logits");
  }

  // Every prompt position's logits, prefilling in chunks of `chunk`.
  std::vector<float> PromptLogits(int chunk) {
    auto pool = model_->NewStatePool(1);
    EXPECT_TRUE(pool.ok());
    std::vector<float> all;
    std::span<const int32_t> p = prompt_;
    for (size_t b = 0; b < p.size(); b += chunk) {
      SequenceChunk c{.slot = 0, .tokens = p.subspan(b, std::min<size_t>(chunk, p.size() - b)), .all_logits = true};
      auto logits = model_->Forward({&c, 1}, *pool);
      EXPECT_TRUE(logits.ok()) << logits.status();
      if (!logits.ok()) return {};
      auto host = *logits->ToHostF32();
      all.insert(all.end(), host.begin(), host.end());
    }
    return all;
  }

  std::unique_ptr<Model> model_;
  std::vector<int32_t> prompt_;
  std::vector<float> logits_;
};

TEST_P(McParityTest, PromptLogitsMatchReference) {
  EXPECT_LE(RelativeError(PromptLogits(static_cast<int>(prompt_.size())), logits_), kLogitTolerance);
}

// Chunks of 1 (decode), 3 and 5 cross segment boundaries at every offset; 4 ends exactly on them.
TEST_P(McParityTest, ChunkedPrefillMatchesReference) {
  for (int chunk : {1, 3, 4, 5}) {
    EXPECT_LE(RelativeError(PromptLogits(chunk), logits_), kLogitTolerance) << "chunk " << chunk;
  }
}

TEST_P(McParityTest, GreedyGenerationMatchesReference) {
  auto pool = model_->NewStatePool(1);
  ASSERT_TRUE(pool.ok());
  auto generated = Generate(*model_, *pool, 0, prompt_,
                            {.max_tokens = static_cast<int>(GetParam().greedy_ids.size()), .prefill_chunk = 7,
                             .stop_at_eos = false, .sampling = {.temperature = 0.0f}});
  ASSERT_TRUE(generated.ok()) << generated.status();
  EXPECT_EQ(*generated, GetParam().greedy_ids);
}

INSTANTIATE_TEST_SUITE_P(Variants, McParityTest, ::testing::ValuesIn(LoadVariants()),
                         [](const auto& info) { return info.param.base + "_" + info.param.name; });

}  // namespace
}  // namespace mcserve::engine

#include "engine/model/weights.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/model/safetensors.h"
#include "engine/model/tokenizer.h"
#include "gtest/gtest.h"
#include "kernels/core/tensor_data.h"  // test-only: checks the alignment of returned views
#include "tests/unit/engine/model_test_util.h"

namespace mcserve::engine {
namespace {

using kernels::DType;
using kernels::Shape;
using testing::Bf16Bytes;
using testing::BuildSafetensors;
using testing::F32Bytes;
using testing::FileImage;
using testing::HasError;
using testing::TempDir;
using testing::WriteFile;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

std::vector<float> Values(const kernels::Tensor& t) {
  auto v = t.ToHostF32();
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *v : std::vector<float>{};
}

TEST(WeightStoreTest, OpensSingleFile) {
  TempDir dir;
  WriteFile(dir.File("model.safetensors"),
            BuildSafetensors({{"model.norm.weight", "F32", {3}, F32Bytes({1.f, 2.f, 3.f})},
                              {"model.embeddings.weight", "BF16", {2, 2},
                               Bf16Bytes({0x3f80, 0x4000, 0xbf80, 0x0000})}}));
  auto store = WeightStore::Open(dir.path());
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->Names(), (std::vector<std::string>{"model.embeddings.weight", "model.norm.weight"}));
  EXPECT_TRUE((*store)->Has("model.norm.weight"));
  EXPECT_FALSE((*store)->Has("lm_head.weight"));
  EXPECT_EQ((*store)->FileOf("model.norm.weight"), dir.File("model.safetensors"));
  EXPECT_EQ((*store)->FileOf("lm_head.weight"), "");

  auto norm = (*store)->Get("model.norm.weight", Shape{3});
  ASSERT_TRUE(norm.ok()) << norm.status();
  EXPECT_EQ(norm->dtype(), DType::kF32);
  EXPECT_TRUE(norm->read_only());
  EXPECT_EQ(Values(*norm), (std::vector<float>{1.f, 2.f, 3.f}));

  auto emb = (*store)->Get("model.embeddings.weight");
  ASSERT_TRUE(emb.ok()) << emb.status();
  EXPECT_EQ(emb->dtype(), DType::kBF16);
  EXPECT_EQ(emb->shape(), (Shape{2, 2}));
  EXPECT_EQ(Values(*emb), (std::vector<float>{1.f, 2.f, -1.f, 0.f}));
}

TEST(WeightStoreTest, TensorsOutliveTheStore) {
  TempDir dir;
  WriteFile(dir.File("model.safetensors"), BuildSafetensors({{"w", "F32", {2}, F32Bytes({7.f, 8.f})}}));
  kernels::Tensor kept;
  {
    auto store = WeightStore::Open(dir.path());
    ASSERT_TRUE(store.ok()) << store.status();
    auto w = (*store)->Get("w");
    ASSERT_TRUE(w.ok()) << w.status();
    kept = *w;
  }
  EXPECT_EQ(Values(kept), (std::vector<float>{7.f, 8.f}));
}

// Dropping the files' resident pages (once the CPU copied the weights into huge pages) leaves every view
// and every later Get reading the same values, faulted in from the file again.
TEST(WeightStoreTest, ViewsReadTheSameAfterTheResidentPagesAreDropped) {
  TempDir dir;
  std::vector<float> big(20000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i) * 0.5f;
  WriteFile(dir.File("model.safetensors"), BuildSafetensors({{"a", "F32", {2}, F32Bytes({7.f, 8.f})},
                                                             {"big", "F32", {20000}, F32Bytes(big)}}));
  auto store = WeightStore::Open(dir.path());
  ASSERT_TRUE(store.ok()) << store.status();
  auto a = (*store)->Get("a");
  auto b = (*store)->Get("big");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(Values(*b), big);  // resident now
  (*store)->DropResidentPages();
  EXPECT_EQ(Values(*a), (std::vector<float>{7.f, 8.f}));
  EXPECT_EQ(Values(*b), big);
  auto again = (*store)->Get("big");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(Values(*again), big);
}

TEST(WeightStoreTest, MissingTensorIsNotFoundNamingIt) {
  TempDir dir;
  WriteFile(dir.File("model.safetensors"), BuildSafetensors({{"w", "F32", {1}, F32Bytes({1.f})}}));
  auto store = WeightStore::Open(dir.path());
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_TRUE(HasError((*store)->Get("lm_head.weight").status(), absl::StatusCode::kNotFound,
                       {"lm_head.weight", dir.path()}));
}

TEST(WeightStoreTest, WrongShapeNamesFileTensorAndShapes) {
  TempDir dir;
  WriteFile(dir.File("model.safetensors"),
            BuildSafetensors({{"q_proj.weight", "F32", {2, 3}, F32Bytes({1, 2, 3, 4, 5, 6})}}));
  auto store = WeightStore::Open(dir.path());
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_TRUE(HasError((*store)->Get("q_proj.weight", Shape{3, 2}).status(), kInvalid,
                       {dir.File("model.safetensors"), "q_proj.weight", "[2, 3]", "[3, 2]"}));
}

TEST(WeightStoreTest, CopiesMisalignedTensors) {
  TempDir dir;
  // The header length makes the data section start at an odd file offset, so the F16 tensor and
  // the F32 tensor after it are both misaligned for their dtypes inside the page-aligned mmap.
  std::string header =
      R"({"a":{"dtype":"F16","shape":[1],"data_offsets":[0,2]},"b":{"dtype":"F32","shape":[2],"data_offsets":[2,10]}})";
  if ((8 + header.size()) % 2 == 0) header += ' ';
  std::string data = Bf16Bytes({0x3c00})  /* F16 1.0 */ + F32Bytes({1.5f, -2.f});
  WriteFile(dir.File("model.safetensors"), FileImage(header, data));
  auto store = WeightStore::Open(dir.path());
  ASSERT_TRUE(store.ok()) << store.status();
  for (const char* name : {"a", "b"}) {
    auto t = (*store)->Get(name);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(kernels::RawData(*t)) % kernels::DTypeSize(t->dtype()), 0u) << name;
  }
  EXPECT_EQ(Values(*(*store)->Get("a")), (std::vector<float>{1.f}));
  EXPECT_EQ(Values(*(*store)->Get("b")), (std::vector<float>{1.5f, -2.f}));
}

TEST(WeightStoreTest, NoWeightsFileIsNotFoundNamingDir) {
  TempDir dir;
  EXPECT_TRUE(HasError(WeightStore::Open(dir.path()).status(), absl::StatusCode::kNotFound,
                       {dir.path(), "model.safetensors"}));
}

TEST(WeightStoreTest, CorruptFileErrorNamesFile) {
  TempDir dir;
  WriteFile(dir.File("model.safetensors"),
            FileImage(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,8]}})", std::string(8, '\0')));
  EXPECT_TRUE(HasError(WeightStore::Open(dir.path()).status(), kInvalid,
                       {dir.File("model.safetensors"), "\"w\"", "needs 16"}));
}

// Two shards: a.safetensors {x, y}, b.safetensors {z}.
class ShardedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteFile(dir_.File("a.safetensors"), BuildSafetensors({{"x", "F32", {1}, F32Bytes({1.f})},
                                                            {"y", "F32", {2}, F32Bytes({2.f, 3.f})}}));
    WriteFile(dir_.File("b.safetensors"), BuildSafetensors({{"z", "F32", {1}, F32Bytes({4.f})}}));
  }
  void WriteIndex(const std::string& weight_map) {
    WriteFile(dir_.File("model.safetensors.index.json"),
              R"({"metadata":{"total_size":16},"weight_map":)" + weight_map + "}");
  }
  TempDir dir_;
};

TEST_F(ShardedTest, OpensShards) {
  WriteIndex(R"({"x":"a.safetensors","y":"a.safetensors","z":"b.safetensors"})");
  auto store = WeightStore::Open(dir_.path());
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->Names(), (std::vector<std::string>{"x", "y", "z"}));
  EXPECT_EQ((*store)->FileOf("z"), dir_.File("b.safetensors"));
  EXPECT_EQ((*store)->FileOf("y"), dir_.File("a.safetensors"));
  EXPECT_EQ(Values(*(*store)->Get("z")), (std::vector<float>{4.f}));
  EXPECT_EQ(Values(*(*store)->Get("y", Shape{2})), (std::vector<float>{2.f, 3.f}));
}

TEST_F(ShardedTest, MissingShardFile) {
  WriteIndex(R"({"x":"a.safetensors","y":"a.safetensors","z":"c.safetensors"})");
  EXPECT_TRUE(HasError(WeightStore::Open(dir_.path()).status(), kInvalid,
                       {"model.safetensors.index.json", dir_.File("c.safetensors"), "\"z\"", "does not exist"}));
}

TEST_F(ShardedTest, ShardLacksTensor) {
  WriteIndex(R"({"x":"a.safetensors","y":"a.safetensors","z":"b.safetensors","w":"b.safetensors"})");
  EXPECT_TRUE(HasError(WeightStore::Open(dir_.path()).status(), kInvalid,
                       {"\"w\"", dir_.File("b.safetensors"), "does not contain it"}));
}

TEST_F(ShardedTest, IndexPointsToWrongShard) {
  WriteIndex(R"({"x":"a.safetensors","y":"b.safetensors","z":"b.safetensors"})");
  EXPECT_TRUE(HasError(WeightStore::Open(dir_.path()).status(), kInvalid,
                       {"\"y\"", dir_.File("b.safetensors"), "stored in", dir_.File("a.safetensors")}));
}

TEST_F(ShardedTest, TensorInTwoShards) {
  WriteFile(dir_.File("b.safetensors"),
            BuildSafetensors({{"z", "F32", {1}, F32Bytes({4.f})}, {"x", "F32", {1}, F32Bytes({9.f})}}));
  WriteIndex(R"({"x":"a.safetensors","y":"a.safetensors","z":"b.safetensors"})");
  EXPECT_TRUE(HasError(WeightStore::Open(dir_.path()).status(), kInvalid,
                       {"\"x\"", "two shards", "a.safetensors", "b.safetensors"}));
}

TEST_F(ShardedTest, ShardTensorMissingFromIndex) {
  WriteIndex(R"({"x":"a.safetensors","z":"b.safetensors"})");
  EXPECT_TRUE(HasError(WeightStore::Open(dir_.path()).status(), kInvalid,
                       {"\"y\"", "missing from weight_map"}));
}

TEST_F(ShardedTest, MalformedIndex) {
  WriteIndex(R"({"x":"a.safetensors","y":3})");
  EXPECT_TRUE(HasError(WeightStore::Open(dir_.path()).status(), kInvalid,
                       {"model.safetensors.index.json", "\"y\"", "file name"}));
  WriteIndex(R"({"x":"../a.safetensors"})");
  EXPECT_TRUE(HasError(WeightStore::Open(dir_.path()).status(), kInvalid, {"\"x\"", "../a.safetensors"}));
  WriteIndex(R"({"x":"a.safetensors","x":"b.safetensors"})");
  EXPECT_TRUE(HasError(WeightStore::Open(dir_.path()).status(), kInvalid, {"duplicate key \"x\""}));
  WriteFile(dir_.File("model.safetensors.index.json"), "{\"metadata\":{}}");
  EXPECT_TRUE(HasError(WeightStore::Open(dir_.path()).status(), kInvalid, {"weight_map"}));
  WriteFile(dir_.File("model.safetensors.index.json"), "not json");
  EXPECT_TRUE(HasError(WeightStore::Open(dir_.path()).status(), kInvalid, {"model.safetensors.index.json", "JSON"}));
}

// The fla skeleton's tensors of one layer (prefix p): norms, the SwiGLU MLP, and q/k/v/o_proj with the
// dims the config resolves.
void ExpectFlaLayer(const WeightStore& store, const ModelConfig& c, const std::string& p) {
  const int64_t h = c.hidden_size;
  for (const char* norm : {"attn_norm.weight", "mlp_norm.weight"}) {
    auto t = store.Get(p + norm, Shape{h});
    EXPECT_TRUE(t.ok()) << t.status();
  }
  for (const char* proj : {"mlp.gate_proj.weight", "mlp.up_proj.weight"}) {
    auto t = store.Get(p + proj, Shape{c.intermediate_size, h});
    EXPECT_TRUE(t.ok()) << t.status();
  }
  auto down = store.Get(p + "mlp.down_proj.weight", Shape{h, c.intermediate_size});
  EXPECT_TRUE(down.ok()) << down.status();
  // Mixer dims resolved from the config match q_proj and o_proj.
  // Lattice's shared q/k projection is qk_proj (docs/model-format.md).
  const bool shared_qk = c.family == ModelFamily::kLattice && c.lattice.shared_qk;
  auto q = store.Get(p + (shared_qk ? "attn.qk_proj.weight" : "attn.q_proj.weight"), Shape{c.key_dim, h});
  EXPECT_TRUE(q.ok()) << q.status();
  auto o = store.Get(p + "attn.o_proj.weight", Shape{h, c.value_dim});
  EXPECT_TRUE(o.ok()) << o.status();
  const int64_t kv_groups = c.num_heads / c.num_kv_heads;
  auto k = store.Get(p + (shared_qk ? "attn.qk_proj.weight" : "attn.k_proj.weight"), Shape{c.key_dim / kv_groups, h});
  EXPECT_TRUE(k.ok()) << k.status();
  const int64_t v_rows =
      c.family == ModelFamily::kLinearAttn || c.family == ModelFamily::kGla ? c.value_dim / kv_groups : c.value_dim;
  auto v = store.Get(p + "attn.v_proj.weight", Shape{v_rows, h});
  EXPECT_TRUE(v.ok()) << v.status();
}

// A hope layer (prefix p): attn_norm, the static projections of self-modifying Titans and one set of
// tensors per CMS level.
void ExpectHopeLayer(const WeightStore& store, const ModelConfig& c, const std::string& p) {
  const int64_t h = c.hidden_size;
  EXPECT_TRUE(store.Get(p + "attn_norm.weight", Shape{h}).ok());
  EXPECT_TRUE(store.Get(p + "attn.o_proj.weight", Shape{h, c.value_dim}).ok());
  EXPECT_TRUE(store.Get(p + "attn.o_norm.weight", Shape{c.head_v_dim}).ok());
  EXPECT_EQ(store.Has(p + "attn.q_proj.weight"), !c.hope.adaptive_q);
  const int64_t e = c.hope.memory_expansion * c.head_k_dim;
  EXPECT_TRUE(store.Get(p + "attn.memory.mem.w2", Shape{c.num_heads, e, c.head_k_dim}).ok());
  for (size_t j = 0; j < c.hope.cms_levels.size(); ++j) {
    const CmsLevel& level = c.hope.cms_levels[j];
    const std::string q = p + "cms." + std::to_string(j) + ".";
    EXPECT_TRUE(store.Get(q + "norm.weight", Shape{h}).ok());
    EXPECT_TRUE(store.Get(q + "up_proj.weight", Shape{level.intermediate_size, h}).ok());
    EXPECT_TRUE(store.Get(q + "down_proj.weight", Shape{h, level.intermediate_size}).ok());
    EXPECT_EQ(store.Has(q + "gate_proj.weight"), level.swiglu);
  }
}

// A gam layer (prefix blocks.{i}.): ln1, the depthwise conv with bias, the memory bank, the gate
// projection, ln2 and the biased GELU MLP (4·n_embed wide).
void ExpectGamLayer(const WeightStore& store, const ModelConfig& c, const std::string& p) {
  const int64_t d = c.hidden_size, k = c.gam.conv_kernel_size;
  for (const char* vec : {"ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias", "causal_conv.bias", "ffn.2.bias"}) {
    EXPECT_TRUE(store.Get(p + vec, Shape{d}).ok()) << p << vec;
  }
  EXPECT_TRUE(store.Get(p + "causal_conv.weight", Shape{d, 1, k}).ok());
  EXPECT_TRUE(store.Get(p + "memory_bank", Shape{c.gam.num_memory_slots, d}).ok());
  EXPECT_TRUE(store.Get(p + "gate.weight", Shape{2 * d, d}).ok());
  EXPECT_TRUE(store.Get(p + "gate.bias", Shape{2 * d}).ok());
  EXPECT_TRUE(store.Get(p + "ffn.0.weight", Shape{4 * d, d}).ok());
  EXPECT_TRUE(store.Get(p + "ffn.0.bias", Shape{4 * d}).ok());
  EXPECT_TRUE(store.Get(p + "ffn.2.weight", Shape{d, 4 * d}).ok());
}

// gam's skeleton: token and position embeddings, ln_f, no separate head (tied).
void ExpectGamSkeleton(const WeightStore& store, const ModelConfig& c) {
  const int64_t d = c.hidden_size;
  EXPECT_TRUE(store.Get("token_embedding.weight", Shape{c.vocab_size, d}).ok());
  EXPECT_TRUE(store.Get("pos_embedding.weight", Shape{c.gam.block_size, d}).ok());
  EXPECT_TRUE(store.Get("ln_f.weight", Shape{d}).ok());
  EXPECT_TRUE(store.Get("ln_f.bias", Shape{d}).ok());
  EXPECT_FALSE(store.Has("head.weight"));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) ExpectGamLayer(store, c, "blocks." + std::to_string(i) + ".");
}

// armt's skeleton: wte, wpe, the memory rows, ln_f, and every layer's ARMT and GPT-2 tensors (Conv1D
// weights stored [in, out]).
void ExpectArmtSkeleton(const WeightStore& store, const ModelConfig& c) {
  const int64_t d = c.hidden_size, p = c.armt.d_mem, i = c.intermediate_size;
  const std::string t = "memory_cell.model.transformer.";
  EXPECT_TRUE(store.Get(t + "wte.weight", Shape{c.vocab_size, d}).ok());
  EXPECT_TRUE(store.Get("memory_cell.memory", Shape{c.armt.num_mem_tokens, d}).ok());
  EXPECT_TRUE(store.Get(t + "ln_f.bias", Shape{d}).ok());
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string h = t + "h." + std::to_string(l) + ".";
    EXPECT_TRUE(store.Get(h + "W_mq.weight", Shape{p, d}).ok());
    EXPECT_TRUE(store.Get(h + "W_mv.weight", Shape{d, d}).ok());
    EXPECT_TRUE(store.Get(h + "layer.attn.c_attn.weight", Shape{d, 3 * d}).ok());
    EXPECT_TRUE(store.Get(h + "layer.mlp.c_fc.weight", Shape{d, i}).ok());
  }
}

// The fla skeleton (and hope's): embeddings, final norm, the head unless tied, every layer.
void ExpectFlaSkeleton(const WeightStore& store, const ModelConfig& c) {
  const int64_t h = c.hidden_size;
  EXPECT_TRUE(store.Get("model.embeddings.weight", Shape{c.vocab_size, h}).ok());
  EXPECT_TRUE(store.Get("model.norm.weight", Shape{h}).ok());
  if (c.tie_word_embeddings) {
    EXPECT_FALSE(store.Has("lm_head.weight"));
  } else {
    EXPECT_TRUE(store.Get("lm_head.weight", Shape{c.vocab_size, h}).ok());
  }
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    if (c.family == ModelFamily::kHope) {
      ExpectHopeLayer(store, c, p);
    } else {
      ExpectFlaLayer(store, c, p);
    }
  }
}

// Every fixture directory under tests/data/models loads: config, weights, tokenizer, golden file,
// and the shared skeleton's tensors have the shapes the config implies.
TEST(FixtureModelsTest, EveryFixtureLoads) {
  const std::filesystem::path root = std::filesystem::path(MCSERVE_TEST_DATA_DIR) / "models";
  if (!std::filesystem::exists(root)) GTEST_SKIP() << root << " does not exist yet";
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    if (!entry.is_directory()) continue;
    const std::string dir = entry.path().string();
    SCOPED_TRACE(dir);
    ++count;
    auto config = LoadModelConfig(dir);
    ASSERT_TRUE(config.ok()) << config.status();
    auto store = WeightStore::Open(dir);
    ASSERT_TRUE(store.ok()) << store.status();
    const ModelConfig& c = *config;
    if (c.family == ModelFamily::kGam) {
      ExpectGamSkeleton(**store, c);
    } else if (c.family == ModelFamily::kArmt) {
      ExpectArmtSkeleton(**store, c);
    } else {
      ExpectFlaSkeleton(**store, c);
    }
    const std::string golden = dir + "/golden.safetensors";
    if (std::filesystem::exists(golden)) {
      auto file = SafetensorsFile::Open(golden);
      EXPECT_TRUE(file.ok()) << file.status();
    }
    const std::string tokenizer_path = dir + "/tokenizer.model";
    if (std::filesystem::exists(tokenizer_path)) {
      auto tokenizer = Tokenizer::Load(tokenizer_path);
      ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
      EXPECT_LE((*tokenizer)->vocab_size(), c.vocab_size);
    }
  }
  EXPECT_GT(count, 0) << "no fixture model directories under " << root;
}

}  // namespace
}  // namespace mcserve::engine

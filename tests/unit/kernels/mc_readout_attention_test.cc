// Spec B.5.7 / B.12 #4: Memory Caching with segment size 1 and a value-less memory (each cached
// memory returns its token's value whatever the query) is softmax attention: GRM's gate is the
// attention weight softmax(⟨u, k_i⟩) over the tokens, the online one included.
#include <cmath>

#include "gtest/gtest.h"
#include "kernels/mc_readout/mc_readout.h"
#include "random_inputs.h"

namespace mcserve::kernels {
namespace {

TEST(McReadoutAttentionTest, SegmentSizeOneValueLessMemoryIsSoftmaxAttention) {
  const int64_t hs = 2, k = 8, v = 5, tokens = 9;  // token t has t cached segments (tokens 0..t-1)
  // Keys and values of every token; the "memory" of token i is S_i = e₀ v_iᵀ, so read(S_i, e₀) = v_i.
  const std::vector<float> keys = RandomVector(tokens * hs * k, 1, -2.0f, 2.0f);    // [tokens, Hs, K]
  const std::vector<float> values = RandomVector(tokens * hs * v, 2, -1.0f, 1.0f);  // [tokens, Hs, V]
  const std::vector<float> queries = RandomVector(tokens * hs * k, 3, -2.0f, 2.0f); // u [tokens, Hs, K]
  std::vector<Tensor> memories, pools;
  for (int64_t i = 0; i < tokens; ++i) {
    std::vector<float> s(hs * k * v, 0.0f), pool(hs * k);
    for (int64_t h = 0; h < hs; ++h) {
      for (int64_t c = 0; c < v; ++c) s[(h * k + 0) * v + c] = values[(i * hs + h) * v + c];
      for (int64_t d = 0; d < k; ++d) pool[h * k + d] = keys[(i * hs + h) * k + d];
    }
    memories.push_back(*Tensor::FromHost(s, {hs, k, v}, Device::kCpu));
    pools.push_back(*Tensor::FromHost(pool, {hs, k}, Device::kCpu));
  }
  std::vector<McPage> pages;
  for (int64_t i = 0; i < tokens; ++i) pages.push_back({.memory = &memories[i], .pooled_key = &pools[i]});
  std::vector<int32_t> offsets = {0}, token_pages;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int32_t i = 0; i < t; ++i) token_pages.push_back(i);
    offsets.push_back(static_cast<int32_t>(token_pages.size()));
  }
  std::vector<float> e0(tokens * hs * k, 0.0f);
  for (int64_t r = 0; r < tokens * hs; ++r) e0[r * k] = 1.0f;
  Tensor q = *Tensor::FromHost(e0, {tokens, hs, k}, Device::kCpu);
  Tensor u = *Tensor::FromHost(queries, {tokens, hs, k}, Device::kCpu);
  Tensor online_pool = *Tensor::FromHost(keys, {tokens, hs, k}, Device::kCpu);  // the token's own key
  Tensor online = *Tensor::FromHost(values, {tokens, hs, v}, Device::kCpu);     // and its own value
  Tensor offsets_t = *Tensor::FromHostI32(offsets, {tokens + 1}, Device::kCpu);
  Tensor pages_t = *Tensor::FromHostI32(token_pages, {static_cast<int64_t>(token_pages.size())}, Device::kCpu);
  Tensor out = *Tensor::Zeros(DType::kF32, {tokens, hs, v}, Device::kCpu);
  ASSERT_TRUE(McReadout({}, {.combine = McCombine::kSoftmax, .q = &q, .u = &u, .online_pool = &online_pool,
                             .online = &online, .pages = pages, .token_page_offsets = &offsets_t,
                             .token_pages = &pages_t, .out = &out})
                  .ok());
  const std::vector<float> y = *out.ToHostF32();
  // Causal softmax attention over tokens 0..t with query u_t.
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t h = 0; h < hs; ++h) {
      std::vector<double> logits(t + 1);
      double max_logit = -INFINITY, total = 0;
      for (int64_t i = 0; i <= t; ++i) {
        double dot = 0;
        for (int64_t d = 0; d < k; ++d) dot += double(queries[(t * hs + h) * k + d]) * keys[(i * hs + h) * k + d];
        logits[i] = dot;
        max_logit = std::max(max_logit, dot);
      }
      for (double& l : logits) total += (l = std::exp(l - max_logit));
      for (int64_t c = 0; c < v; ++c) {
        double expected = 0;
        for (int64_t i = 0; i <= t; ++i) expected += logits[i] / total * values[(i * hs + h) * v + c];
        EXPECT_NEAR(y[(t * hs + h) * v + c], expected, 1e-5) << "token " << t << " head " << h;
      }
    }
  }
}

}  // namespace
}  // namespace mcserve::kernels

// McReadout against an independent double-precision loop: every combine kind (kSum with two weight
// pairs, kSoftmax, kTopKSoftmax with several k), several heads, K ≠ V, per-token CSR page lists with
// shared pages and empty lists, decode and prefill sizes (loop and sgemm paths), thread counts,
// aliasing, exact identities (no pages, top_k ≥ pages, zero gate input), exact score ties, extreme
// scores, and validation.
#include "kernels/mc_readout/mc_readout.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <numeric>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/thread_pool.h"
#include "mc_case.h"
#include "random_inputs.h"

namespace mcserve::kernels {
namespace {

struct Options {
  Options(McCombine kind, int top_k = 2, float online_weight = 1.0f, float cached_weight = 1.0f)
      : kind(kind), top_k(top_k), online_weight(online_weight), cached_weight(cached_weight) {}
  McCombine kind;
  int top_k;
  float online_weight, cached_weight;
};

// Tensors and args of one call built from a Case; out is zero (or is `online` when alias_online).
struct Inputs {
  Tensor q, u, pool_on, online, out, offsets, token_pages;
  std::vector<Tensor> mem, pooled;
  std::vector<McPage> pages;
  McReadoutArgs args;

  Inputs(const Case& c, const Options& o, bool alias_online = false) {
    q = *Tensor::FromHost(c.q, {c.t, c.hs, c.k}, Device::kCpu);
    u = *Tensor::FromHost(c.u, {c.t, c.hs, c.k}, Device::kCpu);
    pool_on = *Tensor::FromHost(c.pool_on, {c.t, c.hs, c.k}, Device::kCpu);
    online = *Tensor::FromHost(c.online, {c.t, c.hs, c.v}, Device::kCpu);
    out = *Tensor::Zeros(DType::kF32, {c.t, c.hs, c.v}, Device::kCpu);
    std::vector<int32_t> off = {0}, idx;
    for (const auto& list : c.lists) {
      idx.insert(idx.end(), list.begin(), list.end());
      off.push_back(static_cast<int32_t>(idx.size()));
    }
    offsets = *Tensor::FromHostI32(off, {c.t + 1}, Device::kCpu);
    token_pages = *Tensor::FromHostI32(idx, {static_cast<int64_t>(idx.size())}, Device::kCpu);
    for (size_t i = 0; i < c.mem.size(); ++i) {
      mem.push_back(*Tensor::FromHost(c.mem[i], {c.hs, c.k, c.v}, Device::kCpu));
      pooled.push_back(*Tensor::FromHost(c.pooled[i], {c.hs, c.k}, Device::kCpu));
    }
    for (size_t i = 0; i < mem.size(); ++i) pages.push_back({&mem[i], &pooled[i]});
    args.combine = o.kind;
    args.top_k = o.top_k;
    args.online_weight = o.online_weight;
    args.cached_weight = o.cached_weight;
    args.q = &q;
    args.u = &u;
    args.online_pool = &pool_on;
    args.online = &online;
    args.pages = pages;
    args.token_page_offsets = &offsets;
    args.token_pages = &token_pages;
    args.out = alias_online ? &online : &out;
  }
};

std::vector<float> RunOp(const Case& c, const Options& o, cpu::ThreadPool* pool, bool alias_online = false) {
  Inputs in(c, o, alias_online);
  Context ctx;
  ctx.pool = pool;
  absl::Status s = McReadout(ctx, in.args);
  EXPECT_TRUE(s.ok()) << s;
  return *in.args.out->ToHostF32();
}

// Double-precision reference: scores, stable sort by score (ties keep list order), softmax over the
// kept pages and the online one, weighted sum of read-outs.
std::vector<double> Reference(const Case& c, const Options& o) {
  std::vector<double> y(c.t * c.hs * c.v);
  for (int64_t t = 0; t < c.t; ++t) {
    for (int64_t h = 0; h < c.hs; ++h) {
      const int64_t row = t * c.hs + h;
      const auto& list = c.lists[t];
      const int n = static_cast<int>(list.size());
      auto dot = [&](const float* a, const float* b) {
        double s = 0;
        for (int64_t i = 0; i < c.k; ++i) s += static_cast<double>(a[i]) * b[i];
        return s;
      };
      std::vector<double> w(n);
      double w_on;
      std::vector<bool> kept(n, true);
      if (o.kind == McCombine::kSum) {
        std::fill(w.begin(), w.end(), o.cached_weight);
        w_on = o.online_weight;
      } else {
        const float* u = c.u.data() + row * c.k;
        std::vector<double> z(n);
        for (int j = 0; j < n; ++j) z[j] = dot(u, c.pooled[list[j]].data() + h * c.k);
        const double z_on = dot(u, c.pool_on.data() + row * c.k);
        if (o.kind == McCombine::kTopKSoftmax && n > o.top_k) {
          std::vector<int> order(n);
          std::iota(order.begin(), order.end(), 0);
          std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return z[a] > z[b]; });
          std::fill(kept.begin(), kept.end(), false);
          for (int r = 0; r < o.top_k; ++r) kept[order[r]] = true;
        }
        double m = z_on;
        for (int j = 0; j < n; ++j) {
          if (kept[j]) m = std::max(m, z[j]);
        }
        double sum = std::exp(z_on - m);
        for (int j = 0; j < n; ++j) {
          w[j] = kept[j] ? std::exp(z[j] - m) : 0.0;
          sum += w[j];
        }
        for (double& x : w) x /= sum;
        w_on = std::exp(z_on - m) / sum;
      }
      for (int64_t jv = 0; jv < c.v; ++jv) {
        double acc = w_on * c.online[row * c.v + jv];
        for (int j = 0; j < n; ++j) {
          const float* S = c.mem[list[j]].data() + h * c.k * c.v;
          double read = 0;
          for (int64_t i = 0; i < c.k; ++i) read += static_cast<double>(S[i * c.v + jv]) * c.q[row * c.k + i];
          acc += w[j] * read;
        }
        y[row * c.v + jv] = acc;
      }
    }
  }
  return y;
}

void ExpectClose(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << "element " << i;
    ASSERT_NEAR(got[i], want[i], 2e-5 + 2e-5 * std::fabs(want[i])) << "element " << i;
  }
}

struct Config {
  std::string name;
  Options options;
};
void PrintTo(const Config& c, std::ostream* os) { *os << c.name; }

std::vector<Config> AllConfigs() {
  return {
      {"Sum11", {McCombine::kSum, 0, 1.0f, 1.0f}},
      {"SumHalf", {McCombine::kSum, 0, 0.5f, 0.5f}},
      {"Softmax", {McCombine::kSoftmax}},
      {"TopK1", {McCombine::kTopKSoftmax, 1}},
      {"TopK2", {McCombine::kTopKSoftmax, 2}},
      {"TopK3", {McCombine::kTopKSoftmax, 3}},
  };
}

class McReadoutTest : public testing::TestWithParam<Config> {};

TEST_P(McReadoutTest, MatchesDoubleReferenceOnAnyThreadCount) {
  const Options& o = GetParam().options;
  cpu::ThreadPool pool(2);
  struct Size {
    int64_t t, hs, k, v;
    int pages;
  };
  // Decode (1 token: loop path), prefill across several 64-token blocks (sgemm path), K ≠ V both ways.
  for (Size s : {Size{1, 2, 5, 7, 4}, Size{3, 1, 8, 8, 1}, Size{150, 3, 5, 7, 6}, Size{70, 2, 16, 12, 5},
                 Size{33, 4, 12, 9, 0}}) {
    SCOPED_TRACE(testing::Message() << "T=" << s.t << " Hs=" << s.hs << " K=" << s.k << " V=" << s.v
                                    << " pages=" << s.pages);
    const Case c = RandomCase(s.t, s.hs, s.k, s.v, s.pages, 7 * s.t + s.k);
    const std::vector<float> one = RunOp(c, o, nullptr);
    ExpectClose(one, Reference(c, o));
    EXPECT_EQ(one, RunOp(c, o, &pool)) << "threads 1 vs 2";
    EXPECT_EQ(one, RunOp(c, o, &pool, /*alias_online=*/true)) << "out aliasing online";
  }
}

TEST_P(McReadoutTest, TokensWithoutPagesGiveTheOnlineReadoutExactly) {
  const Options& o = GetParam().options;
  const Case c = RandomCase(40, 3, 6, 5, 4, 11);
  const std::vector<float> y = RunOp(c, o, nullptr);
  const float scale = o.kind == McCombine::kSum ? o.online_weight : 1.0f;
  int checked = 0;
  for (int64_t t = 0; t < c.t; ++t) {
    if (!c.lists[t].empty()) continue;
    ++checked;
    for (int64_t i = t * c.hs * c.v; i < (t + 1) * c.hs * c.v; ++i) ASSERT_EQ(y[i], scale * c.online[i]);
  }
  EXPECT_EQ(checked, 8);
}

// Decode-shaped lists (each page read by at most two tokens, every list ascending) are read token by
// token; a page read by three tokens in a later block makes the same tokens' rows go page by page.
// Both walks add the same terms in the same order, so the rows agree bit for bit.
TEST_P(McReadoutTest, DecodeListsReadTokenByTokenGiveThePageWalksBits) {
  const Options& o = GetParam().options;
  const int64_t tokens = 6, pages = 12;
  Case decode = RandomCase(tokens, 3, 8, 12, pages, 41);
  for (int64_t i = 0; i < tokens; ++i) {  // page j < 6: tokens j and j − 1; page j ≥ 6: token j − 6
    std::vector<int32_t> list = {static_cast<int32_t>(i), static_cast<int32_t>((i + 1) % tokens),
                                 static_cast<int32_t>(i + tokens)};
    std::sort(list.begin(), list.end());
    decode.lists[i] = i == 3 ? std::vector<int32_t>{} : list;
  }
  Case shared = decode;  // + empty lists up to a block of 64, then 3 tokens reading page 0
  const int64_t extra = 64 - tokens + 3;
  shared.t += extra;
  auto grow = [&](std::vector<float>& x, int64_t width, uint32_t seed) {
    const std::vector<float> more = RandomVector(extra * shared.hs * width, seed);
    x.insert(x.end(), more.begin(), more.end());
  };
  grow(shared.q, shared.k, 51);
  grow(shared.u, shared.k, 52);
  grow(shared.pool_on, shared.k, 53);
  grow(shared.online, shared.v, 54);
  for (int64_t i = tokens; i < shared.t; ++i) {
    shared.lists.push_back(i < 64 ? std::vector<int32_t>{} : std::vector<int32_t>{0});
  }

  const std::vector<float> by_token = RunOp(decode, o, nullptr);
  const std::vector<float> by_page = RunOp(shared, o, nullptr);
  ExpectClose(by_token, Reference(decode, o));
  ExpectClose(by_page, Reference(shared, o));
  ASSERT_GE(by_page.size(), by_token.size());
  EXPECT_TRUE(std::equal(by_token.begin(), by_token.end(), by_page.begin()));
}

INSTANTIATE_TEST_SUITE_P(Kinds, McReadoutTest, testing::ValuesIn(AllConfigs()),
                         [](const testing::TestParamInfo<Config>& info) { return info.param.name; });

TEST(McReadoutIdentities, TopKCoveringAllPagesEqualsSoftmaxExactly) {
  const Case c = RandomCase(90, 2, 7, 6, 5, 21);
  const std::vector<float> softmax = RunOp(c, {McCombine::kSoftmax}, nullptr);
  EXPECT_EQ(RunOp(c, {McCombine::kTopKSoftmax, 5}, nullptr), softmax);
  EXPECT_EQ(RunOp(c, {McCombine::kTopKSoftmax, 100}, nullptr), softmax);
  EXPECT_NE(RunOp(c, {McCombine::kTopKSoftmax, 2}, nullptr), softmax);  // the comparison can fail
}

TEST(McReadoutIdentities, ZeroGateInputWeighsPagesAndOnlineUniformly) {
  Case c = RandomCase(80, 2, 6, 9, 5, 31);
  std::fill(c.u.begin(), c.u.end(), 0.0f);
  const std::vector<float> y = RunOp(c, {McCombine::kSoftmax}, nullptr);
  for (int64_t t = 0; t < c.t; ++t) {
    for (int64_t h = 0; h < c.hs; ++h) {
      const int64_t row = t * c.hs + h;
      const auto& list = c.lists[t];
      for (int64_t j = 0; j < c.v; ++j) {
        double sum = c.online[row * c.v + j];
        for (int32_t p : list) {
          for (int64_t i = 0; i < c.k; ++i) sum += double{c.mem[p][(h * c.k + i) * c.v + j]} * c.q[row * c.k + i];
        }
        const double want = sum / (list.size() + 1);
        ASSERT_NEAR(y[row * c.v + j], want, 1e-5 + 1e-5 * std::fabs(want)) << "t=" << t << " h=" << h;
      }
    }
  }
}

// Pages 1 and 3 have identical pooled keys (exactly equal scores) and different memories; with
// top_k = 1 and both scoring highest, the one earlier in the token's list must win.
TEST(McReadoutTopK, ExactTiesGoToTheLowerListPosition) {
  Case c = RandomCase(2, 2, 4, 3, 4, 41);
  for (int64_t h = 0; h < c.hs; ++h) {
    for (int64_t i = 0; i < c.k; ++i) {
      c.pooled[1][h * c.k + i] = c.pooled[3][h * c.k + i] = 1.0f;
      c.pooled[0][h * c.k + i] = c.pooled[2][h * c.k + i] = -1.0f;
    }
  }
  for (float& x : c.u) x = std::fabs(x) + 0.1f;  // ⟨u, pool⟩ > 0 for pages 1, 3 and < 0 for 0, 2
  c.lists = {{2, 3, 1, 0}, {0, 1, 2, 3}};
  const Options o{McCombine::kTopKSoftmax, 1};
  const std::vector<float> y = RunOp(c, o, nullptr);
  ExpectClose(y, Reference(c, o));
  // The same tokens with the tied pages forced: reading only page 3 (token 0) and only page 1 (token 1).
  Case forced = c;
  forced.lists = {{3}, {1}};
  ExpectClose(y, Reference(forced, {McCombine::kSoftmax}));
  Case swapped = c;
  swapped.lists = {{1}, {3}};
  const std::vector<double> wrong = Reference(swapped, {McCombine::kSoftmax});
  double diff = 0;
  for (size_t i = 0; i < y.size(); ++i) diff = std::max(diff, std::fabs(y[i] - wrong[i]));
  EXPECT_GT(diff, 1e-3);  // the other tie-break would be caught
}

TEST(McReadoutStability, ExtremeScoresStayFinite) {
  Case c = RandomCase(20, 2, 4, 5, 4, 51);
  // Scores ⟨u, pool⟩ = 10·pool[0] with pool[0] in {±12, ±8}: ±120 and ±80, beyond float's exp range.
  const float firsts[4] = {12.0f, -8.0f, 8.0f, -12.0f};
  for (int64_t i = 0; i < c.t * c.hs; ++i) {
    for (int64_t j = 0; j < c.k; ++j) c.u[i * c.k + j] = j == 0 ? 10.0f : 0.0f;
    c.pool_on[i * c.k] = (i % 3 == 0) ? 12.0f : (i % 3 == 1 ? -12.0f : 11.5f);
  }
  for (int p = 0; p < 4; ++p) {
    for (int64_t h = 0; h < c.hs; ++h) c.pooled[p][h * c.k] = firsts[p];
  }
  for (const Options& o : {Options{McCombine::kSoftmax}, Options{McCombine::kTopKSoftmax, 2},
                           Options{McCombine::kTopKSoftmax, 1}}) {
    ExpectClose(RunOp(c, o, nullptr), Reference(c, o));
  }
}

TEST(McReadoutValidation, BadInputsAreInvalidArgument) {
  const Case c = RandomCase(5, 2, 3, 4, 3, 61);
  auto i32 = [](std::vector<int32_t> v) {
    const int64_t n = static_cast<int64_t>(v.size());
    return *Tensor::FromHostI32(v, {n}, Device::kCpu);
  };
  auto f32 = [](Shape s) { return *Tensor::Zeros(DType::kF32, s, Device::kCpu); };
  std::vector<std::pair<std::string, std::function<void(Inputs&, Context&)>>> cases = {
      {"null q", [](Inputs& in, Context&) { in.args.q = nullptr; }},
      {"null out", [](Inputs& in, Context&) { in.args.out = nullptr; }},
      {"null offsets", [](Inputs& in, Context&) { in.args.token_page_offsets = nullptr; }},
      {"null u", [](Inputs& in, Context&) { in.args.u = nullptr; }},
      {"null online_pool", [](Inputs& in, Context&) { in.args.online_pool = nullptr; }},
      {"q I32", [&](Inputs& in, Context&) { in.q = *Tensor::FromHostI32(std::vector<int32_t>(30), {5, 2, 3}, Device::kCpu); }},
      {"q rank 2", [&](Inputs& in, Context&) { in.q = f32({5, 6}); }},
      {"online heads", [&](Inputs& in, Context&) { in.online = f32({5, 3, 4}); }},
      {"out shape", [&](Inputs& in, Context&) { in.out = f32({5, 2, 3}); }},
      {"out read-only", [&](Inputs& in, Context&) {
         static std::shared_ptr<std::vector<float>> buf = std::make_shared<std::vector<float>>(40);
         in.out = Tensor::WrapHost(buf->data(), DType::kF32, {5, 2, 4}, buf);
       }},
      {"u shape", [&](Inputs& in, Context&) { in.u = f32({5, 2, 4}); }},
      {"online_pool tokens", [&](Inputs& in, Context&) { in.pool_on = f32({4, 2, 3}); }},
      {"page memory null", [](Inputs& in, Context&) { in.pages[1].memory = nullptr; }},
      {"page memory [Hs, V, K]", [&](Inputs& in, Context&) { in.mem[2] = f32({2, 4, 3}); }},
      {"page pooled_key null", [](Inputs& in, Context&) { in.pages[0].pooled_key = nullptr; }},
      {"page pooled_key shape", [&](Inputs& in, Context&) { in.pooled[0] = f32({1, 3}); }},
      {"offsets F32", [&](Inputs& in, Context&) { in.offsets = f32({6}); }},
      {"offsets length", [&](Inputs& in, Context&) { in.offsets = i32({0, 0, 0, 0, 0}); }},
      {"offsets[0] != 0", [&](Inputs& in, Context&) {
         auto off = *in.offsets.ToHostI32();
         off[0] = 1;
         in.offsets = i32(off);
       }},
      {"offsets decrease", [&](Inputs& in, Context&) {
         auto off = *in.offsets.ToHostI32();
         std::swap(off[1], off[3]);
         if (off[1] == off[3]) off[3] = off[1] - 1;
         in.offsets = i32(off);
       }},
      {"offsets[T] != P", [&](Inputs& in, Context&) {
         auto off = *in.offsets.ToHostI32();
         off[5] -= 1;
         in.offsets = i32(off);
       }},
      {"page index -1", [&](Inputs& in, Context&) {
         auto idx = *in.token_pages.ToHostI32();
         idx[0] = -1;
         in.token_pages = i32(idx);
       }},
      {"page index = num_pages", [&](Inputs& in, Context&) {
         auto idx = *in.token_pages.ToHostI32();
         idx.back() = 3;
         in.token_pages = i32(idx);
       }},
      {"top_k 0", [](Inputs& in, Context&) {
         in.args.combine = McCombine::kTopKSoftmax;
         in.args.top_k = 0;
       }},
      {"NaN online_weight", [](Inputs& in, Context&) { in.args.online_weight = std::nanf(""); }},
      {"inf cached_weight", [](Inputs& in, Context&) { in.args.cached_weight = INFINITY; }},
      {"context on cuda", [](Inputs&, Context& ctx) { ctx.device = Device::kCuda; }},
      {"out aliases q", [&](Inputs& in, Context&) {
         in.out = *in.q.Reshape({5, 2, 3});
         in.online = f32({5, 2, 3});
         for (Tensor& m : in.mem) m = f32({2, 3, 3});
       }},
      {"out overlaps a page's memory", [&](Inputs& in, Context&) {
         in.mem[1] = *(*in.out.Reshape({10, 4})).Rows(4, 10).Reshape({2, 3, 4});
       }},
      {"out overlaps a page's pooled key", [&](Inputs& in, Context&) {
         in.pooled[2] = *(*in.out.Reshape({20, 2})).Rows(17, 20).Reshape({2, 3});
       }},
      {"out partially overlaps online", [&](Inputs& in, Context&) {
         Tensor big = f32({6, 2, 4});
         in.online = big.Rows(0, 5);
         in.out = big.Rows(1, 6);
       }},
  };
  for (auto& [name, mutate] : cases) {
    SCOPED_TRACE(name);
    Inputs in(c, {McCombine::kSoftmax});
    Context ctx;
    mutate(in, ctx);
    absl::Status s = McReadout(ctx, in.args);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("McReadout"), std::string::npos) << s;
  }
  // The valid baseline passes, and kSum needs neither u, online_pool nor pooled keys.
  Inputs ok(c, {McCombine::kSum});
  EXPECT_TRUE(McReadout(Context{}, ok.args).ok());
  ok.args.u = ok.args.online_pool = nullptr;
  ok.pages[0].pooled_key = nullptr;
  EXPECT_TRUE(McReadout(Context{}, ok.args).ok());
}

}  // namespace
}  // namespace mcserve::kernels

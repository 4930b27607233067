// McRoute on the CPU against a brute-force router written here (sort by score, ties by list
// position): lists shorter than, equal to and longer than top_k, empty lists, no pages, exact score
// ties, thread counts; the SSC consistency property (McReadout's top-k softmax on each token's list
// reduced to McRoute's selection equals it on the full list, bit for bit on the CPU); validation.
#include "kernels/mc_route/mc_route.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/mc_readout/mc_readout_math.h"
#include "mc_case.h"

namespace mcserve::kernels {
namespace {

// Brute force: scores with the router's Dot (the semantics fix it), every position sorted by (score
// descending, position ascending), the first top_k kept, written in list order, −1 padded.
std::vector<int32_t> BruteForce(const Case& c, int top_k) {
  std::vector<int32_t> sel;
  for (int64_t t = 0; t < c.t; ++t) {
    const auto& list = c.lists[t];
    const int n = static_cast<int>(list.size());
    for (int64_t h = 0; h < c.hs; ++h) {
      std::vector<float> z(n);
      for (int i = 0; i < n; ++i) {
        z[i] = mc_readout_math::Dot(c.u.data() + (t * c.hs + h) * c.k, c.pooled[list[i]].data() + h * c.k,
                                    static_cast<int>(c.k));
      }
      std::vector<int> order(n);
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(), [&](int a, int b) { return z[a] > z[b] || (z[a] == z[b] && a < b); });
      order.resize(std::min(n, top_k));
      std::sort(order.begin(), order.end());
      for (int i = 0; i < top_k; ++i) sel.push_back(i < static_cast<int>(order.size()) ? list[order[i]] : -1);
    }
  }
  return sel;
}

TEST(McRouteTest, MatchesBruteForceOnAnyThreadCount) {
  cpu::ThreadPool pool(2);
  struct Size {
    int64_t t, hs, k;
    int pages;
    double density;
  };
  for (Size s : {Size{1, 2, 5, 4, 0.6}, Size{150, 3, 5, 6, 0.6}, Size{70, 2, 16, 12, 0.9}, Size{33, 4, 12, 0, 0.6},
                 Size{200, 8, 64, 20, 0.5}}) {
    const Case c = RandomCase(s.t, s.hs, s.k, /*v=*/1, s.pages, 11 * s.t + s.k, s.density);
    for (int top_k : {1, 2, 3, 5, 100}) {
      SCOPED_TRACE(testing::Message() << "T=" << s.t << " Hs=" << s.hs << " K=" << s.k << " pages=" << s.pages
                                      << " top_k=" << top_k);
      const RouteResult one = RunRoute(c, top_k, Device::kCpu);
      ASSERT_TRUE(one.status.ok()) << one.status;
      EXPECT_EQ(one.selected, BruteForce(c, top_k));
      const RouteResult two = RunRoute(c, top_k, Device::kCpu, &pool);
      ASSERT_TRUE(two.status.ok()) << two.status;
      EXPECT_EQ(two.selected, one.selected) << "threads 1 vs 2";
    }
  }
}

TEST(McRouteTest, ListsShorterEqualAndLongerThanTopKAndEmpty) {
  const Case c = RandomCase(150, 3, 5, 1, 6, 5);
  const int top_k = 3;
  int shorter = 0, equal = 0, longer = 0, empty = 0;
  for (const auto& list : c.lists) {
    const int n = static_cast<int>(list.size());
    empty += n == 0;
    shorter += n > 0 && n < top_k;
    equal += n == top_k;
    longer += n > top_k;
  }
  ASSERT_GT(empty, 0);  // the case covers every kind of list
  ASSERT_GT(shorter, 0);
  ASSERT_GT(equal, 0);
  ASSERT_GT(longer, 0);
  const RouteResult r = RunRoute(c, top_k, Device::kCpu);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.selected, BruteForce(c, top_k));
  for (int64_t t = 0; t < c.t; ++t) {
    const auto& list = c.lists[t];
    for (int64_t h = 0; h < c.hs; ++h) {
      const int32_t* sel = r.selected.data() + (t * c.hs + h) * top_k;
      if (static_cast<int>(list.size()) <= top_k) {  // n ≤ top_k keeps the whole list, in order
        for (int i = 0; i < top_k; ++i) {
          ASSERT_EQ(sel[i], i < static_cast<int>(list.size()) ? list[i] : -1) << "t=" << t << " h=" << h;
        }
      } else {
        for (int i = 0; i < top_k; ++i) ASSERT_NE(sel[i], -1) << "t=" << t << " h=" << h;
      }
    }
  }
}

// Hand-computed: one head, K = 2, u = (1, 0), so page i scores pooled[i][0]:
// p0 = 0.5, p1 = 3, p2 = −1, p3 = 2, p4 = 3 (ties with p1).
TEST(McRouteTest, HandComputedSelectionsAndTies) {
  Case c;
  c.t = 7;
  c.hs = 1;
  c.k = 2;
  c.v = 1;
  for (float s : {0.5f, 3.0f, -1.0f, 2.0f, 3.0f}) c.pooled.push_back({s, 9.0f});
  for (int64_t t = 0; t < c.t; ++t) c.u.insert(c.u.end(), {1.0f, 0.0f});
  c.lists = {{}, {2}, {2, 0}, {0, 2, 3}, {2, 4, 0, 1, 3}, {4, 1}, {1, 4}};
  RouteResult r = RunRoute(c, 3, Device::kCpu);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.selected, (std::vector<int32_t>{-1, -1, -1, 2, -1, -1, 2, 0, -1, 0, 2, 3, 4, 1, 3, 4, 1, -1, 1, 4, -1}));
  r = RunRoute(c, 1, Device::kCpu);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.selected, (std::vector<int32_t>{-1, 2, 0, 3, 4, 4, 1}));  // p1/p4 tie: the earlier listed
  r = RunRoute(c, 2, Device::kCpu);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.selected, (std::vector<int32_t>{-1, -1, 2, -1, 2, 0, 0, 3, 4, 1, 4, 1, 1, 4}));
}

TEST(McRouteTest, AllScoresTiedKeepTheFirstTopKListed) {
  Case c = RandomCase(40, 3, 8, 1, 7, 9, /*density=*/0.8);
  for (auto& p : c.pooled) p = c.pooled[0];
  for (int top_k : {1, 2, 4}) {
    const RouteResult r = RunRoute(c, top_k, Device::kCpu);
    ASSERT_TRUE(r.status.ok()) << r.status;
    for (int64_t t = 0; t < c.t; ++t) {
      for (int64_t h = 0; h < c.hs; ++h) {
        for (int i = 0; i < top_k; ++i) {
          ASSERT_EQ(r.selected[(t * c.hs + h) * top_k + i],
                    i < static_cast<int>(c.lists[t].size()) ? c.lists[t][i] : -1);
        }
      }
    }
  }
}

// The property the serving engine relies on: staging only the routed pages changes nothing.
TEST(McRouteTest, ReadoutOnTheRoutedListsEqualsReadoutOnTheFullLists) {
  cpu::ThreadPool pool(2);
  const Case c = RandomCase(150, 3, 6, 5, 8, 13, /*density=*/0.7);
  for (int top_k : {1, 2, 3, 8}) {
    SCOPED_TRACE(testing::Message() << "top_k=" << top_k);
    const RouteResult route = RunRoute(c, top_k, Device::kCpu, &pool);
    ASSERT_TRUE(route.status.ok()) << route.status;
    const Case reduced = ReduceToSelection(c, route.selected, top_k);
    size_t full_entries = 0, reduced_entries = 0;
    for (int64_t t = 0; t < c.t; ++t) {
      full_entries += c.lists[t].size();
      reduced_entries += reduced.lists[t].size();
    }
    if (top_k < 3) {
      EXPECT_LT(reduced_entries, full_entries);  // pages really were dropped
    }
    for (cpu::ThreadPool* p : {static_cast<cpu::ThreadPool*>(nullptr), &pool}) {
      const ReadoutResult full = RunTopKReadout(c, top_k, Device::kCpu, p);
      const ReadoutResult staged = RunTopKReadout(reduced, top_k, Device::kCpu, p);
      ASSERT_TRUE(full.status.ok() && staged.status.ok()) << full.status << " " << staged.status;
      ASSERT_EQ(full.out.size(), staged.out.size());
      float max_diff = 0.0f;
      for (size_t i = 0; i < full.out.size(); ++i)
        max_diff = std::max(max_diff, std::fabs(full.out[i] - staged.out[i]));
      EXPECT_EQ(std::memcmp(full.out.data(), staged.out.data(), full.out.size() * sizeof(float)), 0)
          << "not bit-identical, max |diff| = " << max_diff;
    }
  }
  // The comparison can fail: dropping one routed page of a token that keeps two changes its output.
  const RouteResult route = RunRoute(c, 2, Device::kCpu);
  Case wrong = ReduceToSelection(c, route.selected, 2);
  for (auto& list : wrong.lists) {
    if (list.size() >= 2) {
      list.erase(list.begin());
      break;
    }
  }
  EXPECT_NE(RunTopKReadout(wrong, 2, Device::kCpu).out, RunTopKReadout(c, 2, Device::kCpu).out);
}

TEST(McRouteValidation, BadInputsAreInvalidArgumentNamingTheProblem) {
  const Case c = RandomCase(5, 2, 3, 1, 3, 61);
  const int top_k = 2;
  auto i32 = [](std::vector<int32_t> v) {
    const int64_t n = static_cast<int64_t>(v.size());
    return *Tensor::FromHostI32(v, {n}, Device::kCpu);
  };
  auto f32 = [](Shape s, Device d = Device::kCpu) { return *Tensor::Zeros(DType::kF32, s, d); };
  auto on = [](const Tensor& t, Device d) {
    if (t.dtype() == DType::kI32) return *Tensor::FromHostI32(*t.ToHostI32(), t.shape(), d);
    return *Tensor::FromHost(*t.ToHostF32(), t.shape(), d);
  };
  const Device emu = Device::kCudaEmu;
  struct Bad {
    std::string name;
    std::function<void(RouteInputs&, Context&)> mutate;
    std::string want;  // in the message
  };
  const std::vector<Bad> cases = {
      {"null u", [](RouteInputs& in, Context&) { in.args.u = nullptr; }, "u, token_page_offsets"},
      {"null selected", [](RouteInputs& in, Context&) { in.args.selected = nullptr; }, "selected are required"},
      {"null offsets", [](RouteInputs& in, Context&) { in.args.token_page_offsets = nullptr; }, "required"},
      {"null token_pages", [](RouteInputs& in, Context&) { in.args.token_pages = nullptr; }, "required"},
      {"null pooled key", [](RouteInputs& in, Context&) { in.pooled_ptrs[1] = nullptr; }, "pooled_keys[1] is required"},
      {"top_k 0", [](RouteInputs& in, Context&) { in.args.top_k = 0; }, "top_k = 0"},
      {"top_k -1", [](RouteInputs& in, Context&) { in.args.top_k = -1; }, "top_k = -1"},
      {"u I32",
       [](RouteInputs& in, Context&) {
         in.u = *Tensor::FromHostI32(std::vector<int32_t>(30), {5, 2, 3}, Device::kCpu);
       },
       "u I32[5, 2, 3]"},
      {"u rank 2",
       [&](RouteInputs& in, Context&) {
         in.u = f32({5, 6});
       },
       "want F32 [T, Hs, K]"},
      {"pooled key shape",
       [&](RouteInputs& in, Context&) {
         in.pooled[2] = f32({2, 4});
       },
       "pooled_keys[2] F32[2, 4]"},
      {"pooled key I32",
       [&](RouteInputs& in, Context&) {
         in.pooled[0] = *Tensor::FromHostI32(std::vector<int32_t>(6), {2, 3}, Device::kCpu);
       },
       "pooled_keys[0] I32"},
      {"offsets F32", [&](RouteInputs& in, Context&) { in.offsets = f32({6}); }, "token_page_offsets F32[6]"},
      {"offsets length",
       [&](RouteInputs& in, Context&) {
         in.offsets = i32({0, 0, 0, 0, 0});
       },
       "token_page_offsets I32[5]"},
      {"token_pages F32", [&](RouteInputs& in, Context&) { in.token_pages = f32({in.token_pages.dim(0)}); },
       "token_pages F32"},
      {"token_pages rank 2",
       [&](RouteInputs& in, Context&) {
         in.token_pages = *in.token_pages.Reshape({1, in.token_pages.dim(0)});
       },
       "want I32 [P]"},
      {"selected F32",
       [&](RouteInputs& in, Context&) {
         in.selected = f32({5, 2, top_k});
       },
       "selected F32[5, 2, 2]"},
      {"selected width",
       [&](RouteInputs& in, Context&) {
         in.selected = *Tensor::Zeros(DType::kI32, {5, 2, 3}, Device::kCpu);
       },
       "selected I32[5, 2, 3]"},
      {"selected read-only",
       [&](RouteInputs& in, Context&) {
         static auto buf = std::make_shared<std::vector<int32_t>>(20);
         in.selected = Tensor::WrapHost(buf->data(), DType::kI32, {5, 2, top_k}, buf);
       },
       "selected is read-only"},
      {"selected overlaps token_pages",
       [&](RouteInputs& in, Context&) {
         const int64_t p = in.token_pages.dim(0), n = 5 * 2 * top_k;
         Tensor big = *Tensor::FromHostI32(std::vector<int32_t>(p + n), {p + n}, Device::kCpu);
         in.token_pages = big.Rows(0, p);
         in.selected = *big.Rows(p - 1, p - 1 + n).Reshape({5, 2, top_k});
       },
       "selected overlaps token_pages"},
      {"u on cuda-emu", [&](RouteInputs& in, Context&) { in.u = on(in.u, emu); },
       "u F32[5, 2, 3] on cuda-emu, but the context is on cpu"},
      {"pooled key on cuda-emu", [&](RouteInputs& in, Context&) { in.pooled[1] = on(in.pooled[1], emu); },
       "pooled_keys[1] F32[2, 3] on cuda-emu"},
      {"offsets on cuda-emu", [&](RouteInputs& in, Context&) { in.offsets = on(in.offsets, emu); },
       "token_page_offsets I32[6] on cuda-emu"},
      {"token_pages on cuda-emu", [&](RouteInputs& in, Context&) { in.token_pages = on(in.token_pages, emu); },
       "on cuda-emu, but the context is on cpu"},
      {"selected on cuda-emu", [&](RouteInputs& in, Context&) { in.selected = on(in.selected, emu); },
       "on cuda-emu, but the context is on cpu"},
      {"context on cuda", [](RouteInputs&, Context& ctx) { ctx.device = Device::kCuda; },
       "u F32[5, 2, 3] on cpu, but the context is on cuda"},
      {"offsets[0] != 0",
       [&](RouteInputs& in, Context&) {
         auto off = *in.offsets.ToHostI32();
         off[0] = 1;
         in.offsets = i32(off);
       },
       "token_page_offsets[0] = 1"},
      {"offsets decrease",
       [&](RouteInputs& in, Context&) {
         auto off = *in.offsets.ToHostI32();
         off[1] = off[2] + 1;
         in.offsets = i32(off);
       },
       "token_page_offsets decrease at token 1"},
      {"offsets[T] != P",
       [&](RouteInputs& in, Context&) {
         auto off = *in.offsets.ToHostI32();
         off[5] -= 1;
         in.offsets = i32(off);
       },
       "token_page_offsets[T = 5]"},
      {"page index -1",
       [&](RouteInputs& in, Context&) {
         auto idx = *in.token_pages.ToHostI32();
         idx[0] = -1;
         in.token_pages = i32(idx);
       },
       "token_pages[0] = -1 is out of range for 3 pages"},
      {"page index = num_pages",
       [&](RouteInputs& in, Context&) {
         auto idx = *in.token_pages.ToHostI32();
         idx.back() = 3;
         in.token_pages = i32(idx);
       },
       "= 3 is out of range for 3 pages"},
  };
  for (const Bad& bad : cases) {
    SCOPED_TRACE(bad.name);
    RouteInputs in(c, top_k, Device::kCpu);
    Context ctx;
    bad.mutate(in, ctx);
    const absl::Status s = McRoute(ctx, in.args);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("McRoute: "), std::string::npos) << s;
    EXPECT_NE(s.message().find(bad.want), std::string::npos) << s << " (want \"" << bad.want << "\")";
  }
  // The valid baseline passes.
  RouteInputs ok(c, top_k, Device::kCpu);
  EXPECT_TRUE(McRoute(Context{}, ok.args).ok());
}

}  // namespace
}  // namespace mcserve::kernels

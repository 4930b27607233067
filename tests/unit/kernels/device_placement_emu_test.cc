// Every op checks that each of its tensor arguments lives on the context's device: for each op and
// each tensor argument, the argument alone on the other device (a CPU tensor with a cuda-emu
// context, and a cuda-emu tensor with a CPU context) fails with InvalidArgument naming the op, the
// tensor and both devices, before any kernel runs. The same arguments all on the context's device
// succeed, so each failure is the placement check. McReadout is covered by its own tests.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kernels/core/batch_layout.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/gather_rows/gather_rows.h"
#include "kernels/feature_map/feature_map.h"
#include "kernels/gate/gate.h"
#include "kernels/l2_norm/l2_norm.h"
#include "kernels/linear/linear.h"
#include "kernels/linear_memory/linear_memory.h"
#include "kernels/mc_pool/mc_pool.h"
#include "kernels/rms_norm/rms_norm.h"
#include "kernels/short_conv/short_conv.h"

namespace mcserve::kernels {
namespace {

// Where each argument of one call lives: `misplaced` on `other`, everything else on ctx's device.
struct Placement {
  Device ctx_device;
  Device other;
  std::string misplaced;  // "" = nothing misplaced

  Device operator()(const std::string& name) const { return name == misplaced ? other : ctx_device; }
  Context ctx() const { return Context{.device = ctx_device}; }
  // A zero F32 tensor for argument `name`.
  Tensor F32(const std::string& name, Shape shape) const { return *Tensor::Zeros(DType::kF32, shape, (*this)(name)); }
  // An I32 tensor for argument `name` holding `values`.
  Tensor I32(const std::string& name, const std::vector<int32_t>& values) const {
    return *Tensor::FromHostI32(values, {static_cast<int64_t>(values.size())}, (*this)(name));
  }
};

// Runs one op call built from a Placement.
using Call = std::function<absl::Status(const Placement&)>;

// With all arguments on the context's device the call succeeds; with each of `names` alone on the
// other device it fails, naming the op and that argument.
void ExpectEachArgumentChecked(const char* op, const std::vector<std::string>& names, const Call& call) {
  for (auto [ctx_device, other] : {std::pair{Device::kCudaEmu, Device::kCpu}, std::pair{Device::kCpu, Device::kCudaEmu}}) {
    SCOPED_TRACE(std::string("context on ") + DeviceName(ctx_device));
    const absl::Status ok = call(Placement{ctx_device, other, ""});
    EXPECT_TRUE(ok.ok()) << op << " with every argument on the context's device: " << ok;
    for (const std::string& name : names) {
      const absl::Status s = call(Placement{ctx_device, other, name});
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << op << " with " << name << " misplaced: " << s;
      const std::string want_start = std::string(op) + ": " + name + " ";
      const std::string want_end =
          std::string(" on ") + DeviceName(other) + ", but the context is on " + DeviceName(ctx_device);
      EXPECT_EQ(std::string(s.message()).rfind(want_start, 0), 0u) << s.message();
      EXPECT_NE(std::string(s.message()).find(want_end), std::string::npos) << s.message();
    }
  }
}

TEST(DevicePlacementTest, Linear) {
  ExpectEachArgumentChecked("Linear", {"x", "w", "out"}, [](const Placement& p) {
    Tensor x = p.F32("x", {2, 3}), w = p.F32("w", {4, 3}), out = p.F32("out", {2, 4});
    return Linear(p.ctx(), {.x = &x, .w = &w, .out = &out});
  });
}

TEST(DevicePlacementTest, Embedding) {
  ExpectEachArgumentChecked("GatherRows", {"table", "ids", "out"}, [](const Placement& p) {
    Tensor table = p.F32("table", {5, 3}), ids = p.I32("ids", {1, 4}), out = p.F32("out", {2, 3});
    return GatherRows(p.ctx(), {.table = &table, .ids = &ids, .out = &out});
  });
}

TEST(DevicePlacementTest, RmsNorm) {
  ExpectEachArgumentChecked("RmsNorm", {"x", "weight", "gate", "out"}, [](const Placement& p) {
    Tensor x = p.F32("x", {2, 4}), w = p.F32("weight", {4}), gate = p.F32("gate", {2, 4}), out = p.F32("out", {2, 4});
    return RmsNorm(p.ctx(), {.x = &x, .weight = &w, .gate = &gate, .out = &out});
  });
}

TEST(DevicePlacementTest, L2Norm) {
  ExpectEachArgumentChecked("L2Norm", {"x", "out"}, [](const Placement& p) {
    Tensor x = p.F32("x", {2, 4}), out = p.F32("out", {2, 4});
    return L2Norm(p.ctx(), {.x = &x, .eps = 1e-6f, .out = &out});
  });
}

TEST(DevicePlacementTest, Gate) {
  ExpectEachArgumentChecked("Gate", {"x", "a_log", "dt_bias", "out"}, [](const Placement& p) {
    Tensor x = p.F32("x", {2, 3}), a_log = p.F32("a_log", {3}), dt_bias = p.F32("dt_bias", {3});
    Tensor out = p.F32("out", {2, 3});
    return Gate(p.ctx(), {.kind = GateKind::kSoftplusDecay, .x = &x, .a_log = &a_log, .dt_bias = &dt_bias, .out = &out});
  });
}

TEST(DevicePlacementTest, Elementwise) {
  ExpectEachArgumentChecked("Activation", {"x", "out"}, [](const Placement& p) {
    Tensor x = p.F32("x", {2, 3}), out = p.F32("out", {2, 3});
    return Activation(p.ctx(), {.kind = ActivationKind::kSilu, .x = &x, .out = &out});
  });
  ExpectEachArgumentChecked("Add", {"a", "b", "out"}, [](const Placement& p) {
    Tensor a = p.F32("a", {2, 3}), b = p.F32("b", {2, 3}), out = p.F32("out", {2, 3});
    return Add(p.ctx(), {.a = &a, .b = &b, .out = &out});
  });
  ExpectEachArgumentChecked("SwiGlu", {"gate", "up", "out"}, [](const Placement& p) {
    Tensor gate = p.F32("gate", {2, 3}), up = p.F32("up", {2, 3}), out = p.F32("out", {2, 3});
    return SwiGlu(p.ctx(), {.gate = &gate, .up = &up, .out = &out});
  });
}

TEST(DevicePlacementTest, ShortConv) {
  ExpectEachArgumentChecked(
      "ShortConv", {"x", "weight", "bias", "state", "out", "cu_seqlens", "slot_ids"}, [](const Placement& p) {
        Tensor x = p.F32("x", {3, 4}), w = p.F32("weight", {4, 1, 3}), bias = p.F32("bias", {4});
        Tensor state = p.F32("state", {2, 2, 4}), out = p.F32("out", {3, 4});
        Tensor cu = p.I32("cu_seqlens", {0, 3}), slots = p.I32("slot_ids", {1});
        return ShortConv(p.ctx(), {.x = &x, .weight = &w, .bias = &bias, .layout = {&cu, &slots}, .state = &state,
                                   .out = &out});
      });
}

TEST(DevicePlacementTest, FeatureMap) {
  ExpectEachArgumentChecked("FeatureMap", {"x", "w1", "b1", "w2", "b2", "out"}, [](const Placement& p) {
    Tensor x = p.F32("x", {2, 2, 4}), w1 = p.F32("w1", {4, 4}), b1 = p.F32("b1", {4});
    Tensor w2 = p.F32("w2", {4, 4}), b2 = p.F32("b2", {4}), out = p.F32("out", {2, 2, 4});
    return FeatureMap(p.ctx(), {.kind = FeatureMapKind::kHadamard, .x = &x, .w1 = &w1, .b1 = &b1, .w2 = &w2,
                                .b2 = &b2, .out = &out});
  });
}

// T = 3 rows of one sequence in slot 1 of 2; 2 heads, K = 4, V = 5.
absl::Status RunMemory(const Placement& p, LinearMemoryRule rule, bool normalize) {
  Tensor q = p.F32("q", {3, 2, 4}), k = p.F32("k", {3, 2, 4}), v = p.F32("v", {3, 2, 5});
  Tensor key_decay = p.F32("key_decay", {3, 2, 4});
  Tensor decay = p.F32("decay", {3, 2}), beta = p.F32("beta", {3, 2}), gamma = p.F32("gamma", {3, 2});
  Tensor state = p.F32("state", {2, 2, 4, 5}), out = p.F32("out", {3, 2, 5});
  Tensor aux = p.F32("aux", rule == LinearMemoryRule::kSwla ? Shape{2, 2, 9} : Shape{2, 2, 4});
  Tensor cu = p.I32("cu_seqlens", {0, 3}), slots = p.I32("slot_ids", {1});
  const bool additive = rule == LinearMemoryRule::kAdditive;
  return LinearMemory(p.ctx(), {.rule = rule, .q = &q, .k = &k, .v = &v,
                                .key_decay = additive ? &key_decay : nullptr, .decay = additive ? nullptr : &decay,
                                .beta = additive ? nullptr : &beta, .gamma = additive ? nullptr : &gamma,
                                .normalize = normalize, .layout = {&cu, &slots}, .state = &state, .aux = &aux,
                                .out = &out});
}

TEST(DevicePlacementTest, LinearMemory) {
  ExpectEachArgumentChecked("LinearMemory", {"q", "k", "v", "decay", "beta", "gamma", "state", "aux", "out",
                                             "cu_seqlens", "slot_ids"},
                            [](const Placement& p) { return RunMemory(p, LinearMemoryRule::kSwla, false); });
  ExpectEachArgumentChecked("LinearMemory", {"key_decay", "aux"},
                            [](const Placement& p) { return RunMemory(p, LinearMemoryRule::kAdditive, true); });
}

TEST(DevicePlacementTest, McSegmentPool) {
  ExpectEachArgumentChecked("McSegmentPool", {"k", "first_local", "pool_sum", "out", "cu_seqlens", "slot_ids"},
                            [](const Placement& p) {
                              Tensor k = p.F32("k", {3, 2, 4}), first = p.I32("first_local", {1});
                              Tensor sum = p.F32("pool_sum", {2, 2, 4}), out = p.F32("out", {3, 2, 4});
                              Tensor cu = p.I32("cu_seqlens", {0, 3}), slots = p.I32("slot_ids", {0});
                              return McSegmentPool(p.ctx(), {.k = &k, .layout = {&cu, &slots}, .first_local = &first,
                                                             .segment_size = 4, .pool_sum = &sum, .out = &out});
                            });
}

TEST(DevicePlacementTest, McLevelPool) {
  ExpectEachArgumentChecked("McLevelPool", {"k", "first_position", "level_sums", "out", "cu_seqlens", "slot_ids"},
                            [](const Placement& p) {
                              Tensor k = p.F32("k", {3, 2, 4}), first = p.I32("first_position", {1});
                              Tensor sums = p.F32("level_sums", {2, 2, 4, 4}), out = p.F32("out", {3, 2, 4});
                              Tensor cu = p.I32("cu_seqlens", {0, 3}), slots = p.I32("slot_ids", {0});
                              return McLevelPool(p.ctx(), {.k = &k, .layout = {&cu, &slots}, .first_position = &first,
                                                           .level_sums = &sums, .out = &out});
                            });
}

TEST(DevicePlacementTest, BatchLayoutTensorsShareADevice) {
  const std::vector<int32_t> cu = {0, 3}, slots = {1};
  Tensor cu_cpu = *Tensor::FromHostI32(cu, {2}, Device::kCpu);
  Tensor slots_cpu = *Tensor::FromHostI32(slots, {1}, Device::kCpu);
  Tensor cu_emu = *Tensor::FromHostI32(cu, {2}, Device::kCudaEmu);
  Tensor slots_emu = *Tensor::FromHostI32(slots, {1}, Device::kCudaEmu);
  EXPECT_TRUE(ValidateBatchLayout({&cu_cpu, &slots_cpu}, 3, 2).ok());
  EXPECT_TRUE(ValidateBatchLayout({&cu_emu, &slots_emu}, 3, 2).ok());  // values are not read back
  EXPECT_EQ(ValidateBatchLayout({&cu_emu, &slots_cpu}, 3, 2).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateBatchLayout({&cu_cpu, &slots_emu}, 3, 2).code(), absl::StatusCode::kInvalidArgument);
  // The op-facing overload also requires the context's device and names the op.
  EXPECT_TRUE(ValidateBatchLayout("Op", {&cu_emu, &slots_emu}, 3, 2, Device::kCudaEmu).ok());
  const absl::Status s = ValidateBatchLayout("Op", {&cu_cpu, &slots_cpu}, 3, 2, Device::kCudaEmu);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "Op: cu_seqlens I32[2] on cpu, but the context is on cuda-emu");
  EXPECT_EQ(ValidateBatchLayout("Op", {&cu_cpu, &slots_cpu}, 4, 2, Device::kCpu).message(),
            "Op: batch layout covers rows [0, 3) of 4");
}

}  // namespace
}  // namespace mcserve::kernels

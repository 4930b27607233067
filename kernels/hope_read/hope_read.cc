#include "kernels/hope_read/hope_read.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/core/dispatch.h"
#include "kernels/core/validate.h"

namespace mcserve::kernels {
namespace {

absl::Status Bad(const char* name, const Tensor* t, const std::string& want) {
  return absl::InvalidArgumentError(
      absl::StrCat("HopeRead: ", name, " ", t == nullptr ? "missing" : t->DebugString(), " (want F32 ", want, ")"));
}

bool Is(const Tensor* t, const Shape& s) { return t != nullptr && t->dtype() == DType::kF32 && t->shape() == s; }

// q_conv [H·d, 1, K] and window [n, K−1, H·d] for the query path; neither for a raw read.
absl::Status ValidateQueryPath(const HopeReadArgs& a, int64_t n, int64_t hd) {
  if (!a.query) {
    if (a.q_conv == nullptr && a.window == nullptr) return absl::OkStatus();
    return absl::InvalidArgumentError("HopeRead: a raw read (query false) takes no q_conv or window");
  }
  if (a.q_conv == nullptr || a.q_conv->rank() != 3 || a.q_conv->dim(2) < 1 || !Is(a.q_conv, {hd, 1, a.q_conv->dim(2)})) {
    return Bad("q_conv", a.q_conv, "[H·d, 1, K]");
  }
  const int64_t k = a.q_conv->dim(2);
  if (k > 1 ? !Is(a.window, {n, k - 1, hd}) : a.window != nullptr) {
    return Bad("window", a.window, "[n, K−1, H·d] (null when K = 1)");
  }
  return absl::OkStatus();
}

absl::Status Validate(const Context& ctx, const HopeReadArgs& a) {
  const Tensor* q = a.q_pre;
  if (q == nullptr || q->dtype() != DType::kF32 || q->rank() != 3) return Bad("q_pre", q, "[n, H, d]");
  const int64_t n = q->dim(0), h = q->dim(1), d = q->dim(2), e = static_cast<int64_t>(a.expansion) * d;
  if (a.expansion < 1) return absl::InvalidArgumentError("HopeRead: expansion must be >= 1");
  if (a.activation != HopeActivation::kSilu && a.activation != HopeActivation::kGelu) {
    return absl::InvalidArgumentError("HopeRead: unknown activation");
  }
  MCSERVE_RETURN_IF_ERROR(ValidateQueryPath(a, n, h * d));
  if (a.memory == nullptr || a.memory->rank() != 3 || !Is(a.memory, {n, h, a.memory->dim(2)}) ||
      a.weights_offset < 0 || a.memory->dim(2) < a.weights_offset + 2 * e * d) {
    return Bad("memory", a.memory, "[n, H, P ≥ weights_offset + 2·E·d]");
  }
  if (a.dy != nullptr && !Is(a.dy, q->shape())) return Bad("dy", a.dy, "[n, H, d]");
  if (!Is(a.out, q->shape())) return Bad("out", a.out, "[n, H, d]");
  MCSERVE_RETURN_IF_ERROR(CheckOnDevice("HopeRead", ctx.device,
                                        {{"q_pre", q}, {"window", a.window}, {"q_conv", a.q_conv},
                                         {"memory", a.memory}, {"dy", a.dy}, {"out", a.out}}));
  return CheckWritable("HopeRead", "out", *a.out);
}

}  // namespace

absl::Status HopeRead(const Context& ctx, const HopeReadArgs& args) {
  MCSERVE_RETURN_IF_ERROR(Validate(ctx, args));
  const int64_t n = args.q_pre->dim(0), h = args.q_pre->dim(1), d = args.q_pre->dim(2);
  MCSERVE_ASSIGN_OR_RETURN(Tensor work, Tensor::Zeros(DType::kF32, {n, h, 3 * d + 2 * args.expansion * d}, ctx.device));
  const internal::HopeReadCall call{.args = args, .work = &work};
  return DispatchOp(ctx, "HopeRead", &internal::HopeReadCpu, MCSERVE_CUDA_FN(internal::cuda::HopeReadCuda),
                    &internal::cuda_emu::HopeReadCuda, call);
}

}  // namespace mcserve::kernels

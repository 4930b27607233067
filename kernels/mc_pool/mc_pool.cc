#include "kernels/mc_pool/mc_pool.h"

#include <span>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/core/dispatch.h"
#include "kernels/core/tensor_data.h"
#include "kernels/core/validate.h"

namespace mcserve::kernels {
namespace {

absl::Status Validate(const Context& ctx, const McSegmentPoolArgs& a) {
  if (a.k == nullptr || a.first_local == nullptr || a.pool_sum == nullptr || a.out == nullptr) {
    return absl::InvalidArgumentError("McSegmentPool: k, first_local, pool_sum and out are required");
  }
  MCSERVE_RETURN_IF_ERROR(
      CheckOnDevice("McSegmentPool", ctx.device,
                    {{"k", a.k}, {"first_local", a.first_local}, {"pool_sum", a.pool_sum}, {"out", a.out}}));
  const Tensor &k = *a.k, &sum = *a.pool_sum, &out = *a.out;
  if (k.dtype() != DType::kF32 || sum.dtype() != DType::kF32 || out.dtype() != DType::kF32 || k.rank() != 3 ||
      sum.rank() != 3 || out.rank() != 3 || out.dim(0) != k.dim(0) || out.dim(1) != sum.dim(1) ||
      out.dim(2) != k.dim(2) || sum.dim(2) != k.dim(2) || k.dim(1) == 0 || out.dim(1) % k.dim(1) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("McSegmentPool: k ", k.DebugString(), ", pool_sum ",
                                                   sum.DebugString(), ", out ", out.DebugString(),
                                                   " (want F32 [T, Hk, K], [slots, Hs, K], [T, Hs, K], Hk | Hs)"));
  }
  if (a.segment_size < 1) return absl::InvalidArgumentError("McSegmentPool: segment_size must be >= 1");
  MCSERVE_RETURN_IF_ERROR(CheckWritable("McSegmentPool", "pool_sum", sum));
  MCSERVE_RETURN_IF_ERROR(CheckWritable("McSegmentPool", "out", out));
  MCSERVE_RETURN_IF_ERROR(ValidateBatchLayout("McSegmentPool", a.layout, k.dim(0), sum.dim(0), ctx.device));
  const Tensor& first = *a.first_local;
  if (first.dtype() != DType::kI32 || first.rank() != 1 || first.dim(0) != a.layout.slot_ids->dim(0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("McSegmentPool: first_local ", first.DebugString(), " must be I32 [B]"));
  }
  if (first.device() == Device::kCpu) {
    for (int32_t v : I32Span(first)) {  // on the host: read in place
      if (v < 1 || v > a.segment_size) {
        return absl::InvalidArgumentError(
            absl::StrCat("McSegmentPool: first_local ", v, " outside [1, ", a.segment_size, "]"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateLevels(const Context& ctx, const McLevelPoolArgs& a) {
  if (a.k == nullptr || a.first_position == nullptr || a.level_sums == nullptr || a.out == nullptr) {
    return absl::InvalidArgumentError("McLevelPool: k, first_position, level_sums and out are required");
  }
  MCSERVE_RETURN_IF_ERROR(CheckOnDevice(
      "McLevelPool", ctx.device,
      {{"k", a.k}, {"first_position", a.first_position}, {"level_sums", a.level_sums}, {"out", a.out}}));
  const Tensor &k = *a.k, &sums = *a.level_sums, &out = *a.out;
  if (k.dtype() != DType::kF32 || sums.dtype() != DType::kF32 || out.dtype() != DType::kF32 || k.rank() != 3 ||
      sums.rank() != 4 || out.rank() != 3 || out.dim(0) != k.dim(0) || out.dim(1) != sums.dim(1) ||
      out.dim(2) != k.dim(2) || sums.dim(3) != k.dim(2) || k.dim(1) == 0 || out.dim(1) % k.dim(1) != 0 ||
      sums.dim(2) < 1 || sums.dim(2) > 62) {
    return absl::InvalidArgumentError(absl::StrCat("McLevelPool: k ", k.DebugString(), ", level_sums ",
                                                   sums.DebugString(), ", out ", out.DebugString(),
                                                   " (want F32 [T, Hk, K], [slots, Hs, L, K], [T, Hs, K])"));
  }
  MCSERVE_RETURN_IF_ERROR(CheckWritable("McLevelPool", "level_sums", sums));
  MCSERVE_RETURN_IF_ERROR(CheckWritable("McLevelPool", "out", out));
  MCSERVE_RETURN_IF_ERROR(ValidateBatchLayout("McLevelPool", a.layout, k.dim(0), sums.dim(0), ctx.device));
  const Tensor& first = *a.first_position;
  if (first.dtype() != DType::kI32 || first.rank() != 1 || first.dim(0) != a.layout.slot_ids->dim(0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("McLevelPool: first_position ", first.DebugString(), " must be I32 [B]"));
  }
  if (first.device() == Device::kCpu && a.layout.cu_seqlens->device() == Device::kCpu) {
    const std::span<const int32_t> n = I32Span(first), cu = I32Span(*a.layout.cu_seqlens);  // host: in place
    for (size_t b = 0; b < n.size(); ++b) {
      const int64_t last = int64_t{n[b]} + cu[b + 1] - cu[b] - 1;
      if (n[b] < 1 || last >= (int64_t{1} << sums.dim(2))) {
        return absl::InvalidArgumentError(absl::StrCat("McLevelPool: positions ", n[b], "..", last,
                                                       " outside [1, 2^", sums.dim(2), ")"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status McLevelPool(const Context& ctx, const McLevelPoolArgs& args) {
  MCSERVE_RETURN_IF_ERROR(ValidateLevels(ctx, args));
  return DispatchOp(ctx, "McLevelPool", &internal::McLevelPoolCpu, MCSERVE_CUDA_FN(internal::cuda::McLevelPoolCuda),
                    &internal::cuda_emu::McLevelPoolCuda, args);
}

absl::Status McSegmentPool(const Context& ctx, const McSegmentPoolArgs& args) {
  MCSERVE_RETURN_IF_ERROR(Validate(ctx, args));
  return DispatchOp(ctx, "McSegmentPool", &internal::McSegmentPoolCpu, MCSERVE_CUDA_FN(internal::cuda::McSegmentPoolCuda),
                    &internal::cuda_emu::McSegmentPoolCuda, args);
}

}  // namespace mcserve::kernels

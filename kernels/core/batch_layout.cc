#include "kernels/core/batch_layout.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/core/validate.h"

namespace mcserve::kernels {

absl::Status ValidateBatchLayout(const BatchLayout& layout, int64_t rows, int64_t num_slots) {
  if (layout.cu_seqlens == nullptr || layout.slot_ids == nullptr) {
    return absl::InvalidArgumentError("batch layout needs cu_seqlens and slot_ids");
  }
  const Tensor& cu = *layout.cu_seqlens;
  const Tensor& slots = *layout.slot_ids;
  if (cu.dtype() != DType::kI32 || slots.dtype() != DType::kI32 || cu.rank() != 1 ||
      slots.rank() != 1 || cu.dim(0) != slots.dim(0) + 1) {
    return absl::InvalidArgumentError(absl::StrCat("batch layout: cu_seqlens ", cu.DebugString(),
                                                   " and slot_ids ", slots.DebugString(),
                                                   " must be I32 [B+1] and [B]"));
  }
  if (cu.device() != slots.device()) {
    return absl::InvalidArgumentError(absl::StrCat("batch layout: cu_seqlens ", cu.DebugString(), " and slot_ids ",
                                                   slots.DebugString(), " on different devices"));
  }
  if (cu.device() != Device::kCpu) return absl::OkStatus();  // no copy back: checked on the device side
  // Read in place (host memory): the check runs on every op of every step and allocates nothing
  // for batches of up to kQuadraticSlotCheck sequences.
  const int64_t batch = slots.dim(0);
  const int32_t* c = Data<int32_t>(cu);
  const int32_t* s = Data<int32_t>(slots);
  if (c[0] != 0 || c[batch] != rows) {
    return absl::InvalidArgumentError(absl::StrCat("batch layout covers rows [", c[0], ", ", c[batch], ") of ", rows));
  }
  constexpr int64_t kQuadraticSlotCheck = 64;
  std::vector<bool> used(batch > kQuadraticSlotCheck ? num_slots : 0, false);
  for (int64_t b = 0; b < batch; ++b) {
    if (c[b + 1] < c[b]) return absl::InvalidArgumentError("batch layout: cu_seqlens decreases");
    if (s[b] < 0 || s[b] >= num_slots) {
      return absl::InvalidArgumentError(absl::StrCat("batch layout: slot ", s[b], " outside [0, ", num_slots, ")"));
    }
    const bool repeated = batch > kQuadraticSlotCheck ? used[s[b]] : std::find(s, s + b, s[b]) != s + b;
    if (repeated) return absl::InvalidArgumentError(absl::StrCat("batch layout: slot ", s[b], " used twice"));
    if (batch > kQuadraticSlotCheck) used[s[b]] = true;
  }
  return absl::OkStatus();
}

absl::Status ValidateBatchLayout(const char* op, const BatchLayout& layout, int64_t rows, int64_t num_slots,
                                 Device device) {
  MCSERVE_RETURN_IF_ERROR(
      CheckOnDevice(op, device, {{"cu_seqlens", layout.cu_seqlens}, {"slot_ids", layout.slot_ids}}));
  absl::Status s = ValidateBatchLayout(layout, rows, num_slots);
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(op, ": ", s.message()));
  return absl::OkStatus();
}

}  // namespace mcserve::kernels

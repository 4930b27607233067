// Validation shared by the HOPE scan ops (hope_validate.h).
#include "kernels/hope_memory/hope_validate.h"

#include <cmath>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/core/validate.h"

namespace mcserve::kernels::hope_validate {
namespace {

bool IsFinitePositive(float x) { return x > 0.0f && std::isfinite(x); }

}  // namespace

absl::Status Bad(const char* op, const std::string& msg) { return absl::InvalidArgumentError(absl::StrCat(op, ": ", msg)); }

absl::Status Optional(const char* op, const char* name, const Tensor* t, bool used, const Shape& shape,
                      const char* want, const char* why) {
  if (t == nullptr) return used ? Bad(op, absl::StrCat(name, " is required ", why)) : absl::OkStatus();
  if (!used) return Bad(op, absl::StrCat(name, " is not used ", why, " (pass null)"));
  return CheckTensor(op, name, *t, DType::kF32, shape, want);
}

absl::Status Options(const char* op, const HopeMemoryOptions& o) {
  if (o.head_dim < 1) return Bad(op, absl::StrCat("head_dim = ", o.head_dim, " (want >= 1)"));
  if (o.expansion < 1) return Bad(op, absl::StrCat("expansion = ", o.expansion, " (want >= 1)"));
  if (static_cast<int64_t>(o.expansion) * o.head_dim > (int64_t{1} << 20)) {
    return Bad(op, absl::StrCat("expansion·head_dim = ", static_cast<int64_t>(o.expansion) * o.head_dim, " too large"));
  }
  if (o.conv_size < 1) return Bad(op, absl::StrCat("conv_size = ", o.conv_size, " (want >= 1)"));
  if (o.chunk_size_other < 1) return Bad(op, absl::StrCat("chunk_size_other = ", o.chunk_size_other, " (want >= 1)"));
  if (o.chunk_size_mem < 1) return Bad(op, absl::StrCat("chunk_size_mem = ", o.chunk_size_mem, " (want >= 1)"));
  if (o.activation != HopeActivation::kSilu && o.activation != HopeActivation::kGelu) {
    return Bad(op, "unknown activation");
  }
  if (o.eta_activation != HopeEtaActivation::kSigmoid && o.eta_activation != HopeEtaActivation::kSoftplus) {
    return Bad(op, "unknown eta_activation");
  }
  if (o.w1_rule != HopeW1Rule::kRetention && o.w1_rule != HopeW1Rule::kDgdHidden) return Bad(op, "unknown w1_rule");
  if (o.momentum != HopeMomentum::kNone && o.momentum != HopeMomentum::kConstant &&
      o.momentum != HopeMomentum::kData) {
    return Bad(op, "unknown momentum");
  }
  if (!IsFinitePositive(o.eta_scale)) return Bad(op, absl::StrCat("eta_scale = ", o.eta_scale, " (want finite > 0)"));
  if (!IsFinitePositive(o.grad_scale)) return Bad(op, absl::StrCat("grad_scale = ", o.grad_scale, " (want finite > 0)"));
  if (o.momentum == HopeMomentum::kConstant && !(o.momentum_beta >= 0.0f && o.momentum_beta < 1.0f)) {
    return Bad(op, absl::StrCat("momentum_beta = ", o.momentum_beta, " (want in [0, 1))"));
  }
  return absl::OkStatus();
}

absl::Status Phase(const char* op, const Tensor& phase, int64_t num_seqs) {
  MCSERVE_RETURN_IF_ERROR(CheckTensor(op, "phase", phase, DType::kI32, {num_seqs}, "[B]"));
  if (phase.device() != Device::kCpu) return absl::OkStatus();
  const int32_t* ph = Data<int32_t>(phase);
  for (int64_t i = 0; i < num_seqs; ++i) {
    if (ph[i] < 0) return Bad(op, absl::StrCat("phase[", i, "] = ", ph[i], " (want >= 0)"));
  }
  return absl::OkStatus();
}

absl::Status Disjoint(const char* op, std::initializer_list<Named> written, std::initializer_list<Named> read) {
  for (const auto& [wname, w] : written) {
    if (w == nullptr) continue;
    MCSERVE_RETURN_IF_ERROR(CheckWritable(op, wname, *w));
    for (std::initializer_list<Named> list : {written, read}) {
      for (const auto& [name, other] : list) {
        if (other == nullptr || std::string_view(name) == wname) continue;
        if (Overlaps(*w, *other)) return Bad(op, absl::StrCat(wname, " overlaps ", name));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace mcserve::kernels::hope_validate

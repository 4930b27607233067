#include "engine/runner/weight_binder.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace mcserve::engine {

using kernels::Tensor;

absl::StatusOr<Tensor> WeightBinder::Stored(std::string_view name, const kernels::Shape& shape) const {
  MCSERVE_ASSIGN_OR_RETURN(Tensor t, store_->Get(name, shape));
  if (t.dtype() == kernels::DType::kI32) {
    return absl::InvalidArgumentError(absl::StrCat(store_->FileOf(name), ": tensor ", std::string(name),
                                                   " has dtype I32; weights must be F32, F16 or BF16"));
  }
  if (bound_names_.insert(std::string(name)).second) bound_elements_ += t.numel();
  return t;
}

absl::StatusOr<Tensor> WeightBinder::Matrix(std::string_view name, const kernels::Shape& shape) const {
  MCSERVE_ASSIGN_OR_RETURN(Tensor t, Stored(name, shape));
  if (device_ == kernels::Device::kCpu) return t;
  // Same dtype on the device: a BF16/F16 weight costs 2 bytes per element there too.
  MCSERVE_ASSIGN_OR_RETURN(Tensor d, Tensor::Zeros(t.dtype(), shape, device_));
  MCSERVE_RETURN_IF_ERROR(d.CopyFrom(t));
  return d;
}

absl::StatusOr<Tensor> WeightBinder::Float(std::string_view name, const kernels::Shape& shape) const {
  MCSERVE_ASSIGN_OR_RETURN(Tensor t, Stored(name, shape));
  if (t.dtype() == kernels::DType::kF32 && device_ == kernels::Device::kCpu) return t;
  MCSERVE_ASSIGN_OR_RETURN(std::vector<float> host, t.ToHostF32());
  return Tensor::FromHost(host, shape, device_);
}

}  // namespace mcserve::engine

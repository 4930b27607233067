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
  if (device_ == kernels::Device::kCpu) return arena_.Copy(t);
  // Same dtype on the device: a BF16/F16 weight costs 2 bytes per element there too.
  MCSERVE_ASSIGN_OR_RETURN(Tensor d, Tensor::Zeros(t.dtype(), shape, device_));
  MCSERVE_RETURN_IF_ERROR(d.CopyFrom(t));
  return d;
}

absl::StatusOr<Tensor> WeightBinder::Float(std::string_view name, const kernels::Shape& shape) const {
  MCSERVE_ASSIGN_OR_RETURN(Tensor t, Stored(name, shape));
  if (t.dtype() == kernels::DType::kF32 && device_ == kernels::Device::kCpu) return arena_.Copy(t);
  MCSERVE_ASSIGN_OR_RETURN(std::vector<float> host, t.ToHostF32());
  return FloatOnDevice(host, shape);
}

absl::StatusOr<Tensor> WeightBinder::FloatOnDevice(std::span<const float> host, kernels::Shape shape) const {
  if (device_ == kernels::Device::kCpu) return arena_.FromHost(host, std::move(shape));
  return Tensor::FromHost(host, std::move(shape), device_);
}

absl::StatusOr<Tensor> WeightBinder::Transposed(std::string_view name, const kernels::Shape& stored) const {
  if (stored.size() != 2) return absl::InternalError("WeightBinder::Transposed takes a 2-d shape");
  MCSERVE_ASSIGN_OR_RETURN(Tensor t, Stored(name, stored));
  MCSERVE_ASSIGN_OR_RETURN(std::vector<float> host, t.ToHostF32());  // [in, out]
  const int64_t in = stored[0], out = stored[1];
  std::vector<float> transposed(host.size());  // [out, in]
  for (int64_t i = 0; i < in; ++i) {
    for (int64_t o = 0; o < out; ++o) transposed[o * in + i] = host[i * out + o];
  }
  return FloatOnDevice(transposed, {out, in});
}

absl::StatusOr<kernels::Shape> WeightBinder::StoredShape(std::string_view name) const {
  MCSERVE_ASSIGN_OR_RETURN(Tensor t, store_->Get(name));
  return t.shape();
}

}  // namespace mcserve::engine

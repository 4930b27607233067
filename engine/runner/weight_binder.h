// WeightBinder: fetches a model's tensors by name with the shapes its config implies, so that every
// weight is validated before use. Matrices keep their on-disk dtype (F32/BF16/F16) on every device
// (read as stored by Linear's GEMV/GEMM and GatherRows); vectors and small tensors are widened to F32
// on the model's device. On the CPU every weight is copied out of the mmapped file into huge pages
// (kernels::HostArena), which the decode step streams faster. Used while loading only.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_set.h"

#include "absl/status/statusor.h"
#include "engine/model/weights.h"
#include "kernels/core/host_arena.h"
#include "kernels/core/tensor.h"

namespace mcserve::engine {

class WeightBinder {
 public:
  WeightBinder(std::shared_ptr<const WeightStore> store, kernels::Device device)
      : store_(std::move(store)), device_(device) {}

  // A matrix (projection, embedding) with exactly `shape`, in its stored dtype, on the device.
  absl::StatusOr<kernels::Tensor> Matrix(std::string_view name, const kernels::Shape& shape) const;
  // A tensor with exactly `shape`, converted to F32, on the device.
  absl::StatusOr<kernels::Tensor> Float(std::string_view name, const kernels::Shape& shape) const;
  // A matrix stored [in, out] (HF GPT-2's Conv1D, y = x W + b) given as `stored` = {in, out},
  // transposed at load into the [out, in] layout Linear takes, as F32 on the device. The file is
  // never rewritten; the parameter count counts the stored tensor.
  absl::StatusOr<kernels::Tensor> Transposed(std::string_view name, const kernels::Shape& stored) const;
  // The stored shape of `name` (not bound, not counted); NotFound when absent.
  absl::StatusOr<kernels::Shape> StoredShape(std::string_view name) const;
  bool Has(std::string_view name) const { return store_->Has(name); }
  // The device the weights are bound to.
  kernels::Device device() const { return device_; }
  // Elements of the distinct tensors bound so far (a tensor bound twice, e.g. a tied head, counts once):
  // the model's parameter count once loading is done.
  int64_t bound_parameters() const { return bound_elements_; }

 private:
  // The stored (host) tensor with exactly `shape`; InvalidArgument for an I32 tensor.
  absl::StatusOr<kernels::Tensor> Stored(std::string_view name, const kernels::Shape& shape) const;

  // `host` values of `shape` as an F32 tensor on the device (in the arena on the CPU).
  absl::StatusOr<kernels::Tensor> FloatOnDevice(std::span<const float> host, kernels::Shape shape) const;

  std::shared_ptr<const WeightStore> store_;
  kernels::Device device_;
  mutable kernels::HostArena arena_;  // the CPU's weights
  mutable absl::flat_hash_set<std::string> bound_names_;  // for bound_parameters()
  mutable int64_t bound_elements_ = 0;
};

}  // namespace mcserve::engine

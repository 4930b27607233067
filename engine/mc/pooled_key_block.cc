#include "engine/mc/pooled_key_block.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace mcserve::engine {

using kernels::Tensor;

namespace {

constexpr int64_t kFirstCapacity = 16;  // rows of a block's first buffer

}  // namespace

absl::Status PooledKeyBlock::Append(const Tensor& key, kernels::Device device) {
  const int64_t n = static_cast<int64_t>(rows_.size());
  if (n > 0 && key.shape() != rows_.front().shape()) {
    return absl::InvalidArgumentError(absl::StrCat("pooled key ", key.DebugString(), " does not match the block's ",
                                                   rows_.front().DebugString()));
  }
  if (!HasRoomFor(key)) MCSERVE_RETURN_IF_ERROR(Grow(key, device));
  MCSERVE_ASSIGN_OR_RETURN(Tensor row, buffer_.Rows(n, n + 1).Reshape(key.shape()));
  MCSERVE_RETURN_IF_ERROR(row.CopyFrom(key));
  rows_.push_back(std::move(row));
  return absl::OkStatus();
}

bool PooledKeyBlock::HasRoomFor(const Tensor& key) const {
  if (!buffer_.defined() || buffer_.rank() != key.rank() + 1) return false;
  const kernels::Shape row(buffer_.shape().begin() + 1, buffer_.shape().end());
  return row == key.shape() && static_cast<int64_t>(rows_.size()) < buffer_.dim(0);
}

absl::Status PooledKeyBlock::Grow(const Tensor& key, kernels::Device device) {
  const int64_t n = static_cast<int64_t>(rows_.size());
  kernels::Shape shape = key.shape();
  shape.insert(shape.begin(), std::max(kFirstCapacity, 2 * n));
  MCSERVE_ASSIGN_OR_RETURN(Tensor grown, Tensor::Zeros(kernels::DType::kF32, shape, device));
  if (n > 0) MCSERVE_RETURN_IF_ERROR(grown.Rows(0, n).CopyFrom(buffer_.Rows(0, n)));
  buffer_ = std::move(grown);
  for (int64_t i = 0; i < n; ++i) {
    MCSERVE_ASSIGN_OR_RETURN(rows_[i], buffer_.Rows(i, i + 1).Reshape(key.shape()));
  }
  return absl::OkStatus();
}

void PooledKeyBlock::DropNewest(int64_t count) {
  rows_.resize(static_cast<size_t>(std::max<int64_t>(0, static_cast<int64_t>(rows_.size()) - count)));
}

void PooledKeyBlock::Clear() {
  rows_.clear();
  buffer_ = Tensor();
}

}  // namespace mcserve::engine

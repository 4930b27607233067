#include "kernels/core/host_arena.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/core/tensor_data.h"

namespace mcserve::kernels {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kAlignment = 64;

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

// An anonymous mapping of `size` bytes (a multiple of 2 MiB) starting on a 2 MiB boundary, advised
// to huge pages; unmapped when the pointer goes. Null when mmap fails.
std::shared_ptr<void> MapSlab(size_t size) {
  const size_t mapped = size + kHugePage;  // room to align the start
  void* p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* start = reinterpret_cast<uint8_t*>(RoundUp(reinterpret_cast<uintptr_t>(p), kHugePage));
  ::madvise(start, size, MADV_HUGEPAGE);  // best effort: THP may be off ("never")
  return std::shared_ptr<void>(start, [p, mapped](void*) { ::munmap(p, mapped); });
}

}  // namespace

void* HostArena::Take(size_t nbytes) {
  const size_t rounded = RoundUp(std::max<size_t>(nbytes, 1), kAlignment);
  if (slab_ == nullptr || used_ + rounded > slab_size_) {
    const size_t size = std::max(kSlabBytes, RoundUp(rounded, kHugePage));
    std::shared_ptr<void> slab = MapSlab(size);
    if (slab == nullptr) return nullptr;
    slab_ = std::move(slab), slab_size_ = size, used_ = 0;
  }
  void* p = static_cast<uint8_t*>(slab_.get()) + used_;
  used_ += rounded;
  return p;
}

absl::StatusOr<Tensor> HostArena::Copy(const Tensor& src) {
  if (src.device() != Device::kCpu) return absl::InvalidArgumentError("HostArena::Copy: a host tensor only");
  void* p = Take(static_cast<size_t>(src.nbytes()));
  if (p == nullptr) return absl::ResourceExhaustedError(absl::StrCat("cannot map ", src.nbytes(), " bytes for weights"));
  std::memcpy(p, RawData(src), static_cast<size_t>(src.nbytes()));
  return Tensor::WrapHost(p, src.dtype(), src.shape(), slab_);
}

absl::StatusOr<Tensor> HostArena::FromHost(std::span<const float> values, Shape shape) {
  if (NumElements(shape) != static_cast<int64_t>(values.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("HostArena::FromHost: ", values.size(), " values for shape ", ShapeString(shape)));
  }
  void* p = Take(values.size_bytes());
  if (p == nullptr) return absl::ResourceExhaustedError(absl::StrCat("cannot map ", values.size_bytes(), " bytes"));
  std::memcpy(p, values.data(), values.size_bytes());
  return Tensor::WrapHost(p, DType::kF32, std::move(shape), slab_);
}

}  // namespace mcserve::kernels

// CUDA GatherRows: one block per id gathers its table row, widened to F32. Row ids stay on the
// device and are checked inside the kernel; a bad id raises a device flag that the host reads back
// (one 4-byte copy per call) to fail with InvalidArgument, as the CPU backend does.
//
// Launch shape: grid = m blocks (one per id), block = min(256, H rounded up to 32) threads looping
// over the row's H columns with stride blockDim.x; no shared memory.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/cuda/cuda_compat.h"
#include "kernels/core/device_runtime.h"
#include "kernels/gather_rows/gather_rows.h"
#include "kernels/gather_rows/gather_rows_math.h"

namespace {

namespace km = ::mcserve::kernels;

constexpr int kMaxBlock = 256;

// One stored table element widened to F32.
__device__ __forceinline__ float Widen(float v, km::DType) { return v; }
__device__ __forceinline__ float Widen(uint16_t v, km::DType dtype) {
  return dtype == km::DType::kBF16 ? km::Bf16ToF32(v) : km::F16ToF32(v);
}

// out[i, :] = widen(table[ids[i], :]); table: [vocab, h] of T, ids: [m], out: [m, h].
// An id outside [0, vocab) sets *bad = 1 and leaves its output row untouched.
template <typename T>
__global__ void GatherRowsKernel(const T* table, km::DType dtype, const int32_t* ids, int64_t vocab, int64_t h,
                                float* out, int* bad) {
  const int64_t i = blockIdx.x;
  const int32_t id = ids[i];
  if (!km::gather_rows_math::IdInRange(id, vocab)) {
    if (threadIdx.x == 0) atomicExch(bad, 1);
    return;
  }
  const T* src = table + static_cast<int64_t>(id) * h;
  float* dst = out + i * h;
  for (int64_t c = threadIdx.x; c < h; c += blockDim.x) dst[c] = Widen(src[c], dtype);
}

}  // namespace

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

using ::mcserve::kernels::MCSERVE_CUDA_NS::KernelStream;
using ::mcserve::kernels::MCSERVE_CUDA_NS::TakeLaunchStatus;

absl::Status GatherRowsCuda(const Context& ctx, const GatherRowsArgs& args) {
  const Tensor& table = *args.table;
  const int64_t m = args.ids->dim(0), h = table.dim(1), vocab = table.dim(0);
  if (m == 0) return absl::OkStatus();
  MCSERVE_ASSIGN_OR_RETURN(DeviceRuntime * rt, RuntimeFor(MCSERVE_CUDA_EMULATED ? Device::kCudaEmu : Device::kCuda));
  MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, KernelStream());
  MCSERVE_ASSIGN_OR_RETURN(void* flag_mem, rt->Allocate(sizeof(int)));
  int* bad = static_cast<int*>(flag_mem);
  absl::Status status = rt->Zero(bad, sizeof(int));
  if (status.ok()) {
    const int block = static_cast<int>(std::min<int64_t>(kMaxBlock, std::max<int64_t>(32, (h + 31) / 32 * 32)));
    const int grid = static_cast<int>(m);
    const int32_t* ids = Data<int32_t>(*args.ids);
    float* out = Data<float>(*args.out);
    if (table.dtype() == DType::kF32) {
      MCSERVE_LAUNCH(GatherRowsKernel<float>, grid, block, 0, stream)
      (Data<float>(table), table.dtype(), ids, vocab, h, out, bad);
    } else {
      MCSERVE_LAUNCH(GatherRowsKernel<uint16_t>, grid, block, 0, stream)
      (Data<uint16_t>(table), table.dtype(), ids, vocab, h, out, bad);
    }
    status = TakeLaunchStatus("GatherRows");
  }
  int host_bad = 0;
  if (status.ok()) status = rt->CopyDeviceToHost(&host_bad, bad, sizeof(int));
  rt->Free(flag_mem);
  MCSERVE_RETURN_IF_ERROR(status);
  if (host_bad == 0) return absl::OkStatus();
  // Rare path: find the first bad id on the host for the message.
  MCSERVE_ASSIGN_OR_RETURN(std::vector<int32_t> host_ids, args.ids->ToHostI32());
  for (int64_t i = 0; i < m; ++i) {
    if (!gather_rows_math::IdInRange(host_ids[i], vocab)) {
      return absl::InvalidArgumentError(absl::StrCat("GatherRows: token id ", host_ids[i], " at position ", i,
                                                     " outside vocab [0, ", vocab, ")"));
    }
  }
  return absl::InvalidArgumentError("GatherRows: id out of range");
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS

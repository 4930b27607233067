// The CUDA device runtime (device 0): a caching allocator over cudaMalloc, one stream with pinned
// double-buffered staging for host<->device copies, and Gemm over cuBLAS. Compiled only by nvcc.
//
// Ordering: every operation — copies, Zero, Gemm and (through native_stream / KernelStream) every
// kernel launch — is issued on the runtime's one stream, so work is ordered exactly as it was
// issued; Synchronize and CopyDeviceToHost wait on that stream. A block freed while queued work
// still uses it may be handed out again at once: any later use of it is issued on the same stream,
// after the earlier work.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kernels/core/dtype.h"
#include "base/status_macros.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_runtime.h"
#include "kernels/core/device_runtime.h"
#include "kernels/cuda/size_class.h"

namespace mcserve::kernels::internal {
namespace {

// Pinned staging: two buffers of this size, so one is filled or drained on the host while the
// other is being copied by the device.
constexpr size_t kStagingBytes = size_t{8} << 20;
constexpr int kStagingBuffers = 2;

// Widens 16-bit B entries to F32: entry e (of `entry` elements) of src starts at e * src_stride,
// of dst at e * entry. total = entries * entry.
template <bool kBf16>
__global__ void WidenKernel(const uint16_t* src, int64_t src_stride, int64_t entry, int64_t total, float* dst) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const int64_t e = i / entry;
    const uint16_t v = src[e * src_stride + (i - e * entry)];
    dst[i] = kBf16 ? Bf16ToF32(v) : F16ToF32(v);
  }
}

class CudaRuntime final : public DeviceRuntime {
 public:
  CudaRuntime() = default;
  ~CudaRuntime() override;
  CudaRuntime(const CudaRuntime&) = delete;
  CudaRuntime& operator=(const CudaRuntime&) = delete;

  // Creates the stream, events, pinned staging and the cuBLAS handle on device 0.
  absl::Status Init();

  absl::StatusOr<void*> Allocate(size_t bytes) override;
  void Free(void* ptr) override;
  size_t bytes_in_use() const override;
  size_t bytes_reserved() const override;
  // Returns once `src` may be reused (it has been copied to pinned staging); completion on the
  // device is ordered before anything issued later.
  absl::Status CopyHostToDevice(void* dst, const void* src, size_t bytes) override;
  // Returns once `dst` holds the data.
  absl::Status CopyDeviceToHost(void* dst, const void* src, size_t bytes) override;
  // Asynchronous (stream-ordered), like Zero and Gemm.
  absl::Status CopyDeviceToDevice(void* dst, const void* src, size_t bytes) override;
  absl::Status Zero(void* dst, size_t bytes) override;
  absl::Status Synchronize() override;
  absl::Status Gemm(const DeviceGemmArgs& args) override;
  // The runtime's stream (created by Init, constant afterwards, so read without the lock).
  void* native_stream() const override { return stream_; }

 private:
  struct Staging {
    void* host = nullptr;        // pinned, kStagingBytes
    cudaEvent_t done = nullptr;  // recorded after the last copy that used `host`
    bool pending = false;
  };

  // The next staging buffer, once the device has finished with it.
  absl::StatusOr<Staging*> NextStaging() ABSL_EXCLUSIVE_LOCKS_REQUIRED(stream_mu_);
  // cudaFree of every cached (free) block; used when cudaMalloc runs out of memory.
  void ReleaseCached() ABSL_EXCLUSIVE_LOCKS_REQUIRED(alloc_mu_);
  // Device scratch of at least `bytes` for widened 16-bit GEMM operands.
  absl::StatusOr<float*> Scratch(size_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(stream_mu_);

  mutable std::mutex alloc_mu_;
  std::unordered_map<size_t, std::vector<void*>> free_ ABSL_GUARDED_BY(alloc_mu_);  // class -> blocks
  std::unordered_map<void*, size_t> live_ ABSL_GUARDED_BY(alloc_mu_);               // block -> class
  size_t in_use_ ABSL_GUARDED_BY(alloc_mu_) = 0;
  size_t reserved_ ABSL_GUARDED_BY(alloc_mu_) = 0;

  // Serialises use of the stream, the staging buffers, the cuBLAS handle and the scratch.
  std::mutex stream_mu_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  Staging staging_[kStagingBuffers] ABSL_GUARDED_BY(stream_mu_);
  int next_staging_ ABSL_GUARDED_BY(stream_mu_) = 0;
  float* scratch_ ABSL_GUARDED_BY(stream_mu_) = nullptr;
  size_t scratch_bytes_ ABSL_GUARDED_BY(stream_mu_) = 0;
};

absl::Status CudaRuntime::Init() {
  MCSERVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(0));
  MCSERVE_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  std::lock_guard<std::mutex> lock(stream_mu_);
  for (Staging& s : staging_) {
    MCSERVE_CUDA_RETURN_IF_ERROR(cudaMallocHost(&s.host, kStagingBytes));
    MCSERVE_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
  }
  MCSERVE_CUBLAS_RETURN_IF_ERROR(cublasCreate(&cublas_));
  MCSERVE_CUBLAS_RETURN_IF_ERROR(cublasSetStream(cublas_, stream_));
  // Plain FP32 products (no TF32), so results match the CPU backend within FP32 rounding.
  MCSERVE_CUBLAS_RETURN_IF_ERROR(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
  return absl::OkStatus();
}

CudaRuntime::~CudaRuntime() {
  if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
  {
    std::lock_guard<std::mutex> lock(alloc_mu_);
    for (auto& [size_class, blocks] : free_) {
      for (void* p : blocks) (void)cudaFree(p);
    }
    for (auto& [p, size_class] : live_) (void)cudaFree(p);
  }
  std::lock_guard<std::mutex> lock(stream_mu_);
  if (scratch_ != nullptr) (void)cudaFree(scratch_);
  for (Staging& s : staging_) {
    if (s.host != nullptr) (void)cudaFreeHost(s.host);
    if (s.done != nullptr) (void)cudaEventDestroy(s.done);
  }
  if (cublas_ != nullptr) (void)cublasDestroy(cublas_);
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

void CudaRuntime::ReleaseCached() {
  for (auto& [size_class, blocks] : free_) {
    for (void* p : blocks) {
      (void)cudaFree(p);
      reserved_ -= size_class;
    }
    blocks.clear();
  }
}

absl::StatusOr<void*> CudaRuntime::Allocate(size_t bytes) {
  const size_t size_class = SizeClassBytes(bytes);
  if (size_class == 0) return absl::ResourceExhaustedError(absl::StrCat("cuda: cannot allocate ", bytes, " bytes"));
  std::lock_guard<std::mutex> lock(alloc_mu_);
  void* p = nullptr;
  auto fl = free_.find(size_class);
  if (fl != free_.end() && !fl->second.empty()) {
    p = fl->second.back();
    fl->second.pop_back();
  } else {
    cudaError_t error = cudaMalloc(&p, size_class);
    if (error == cudaErrorMemoryAllocation) {  // give the cache back to the driver and retry once
      (void)cudaGetLastError();
      ReleaseCached();
      error = cudaMalloc(&p, size_class);
    }
    MCSERVE_CUDA_RETURN_IF_ERROR(error);
    reserved_ += size_class;
  }
  live_.emplace(p, size_class);
  in_use_ += size_class;
  return p;
}

void CudaRuntime::Free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(alloc_mu_);
  auto it = live_.find(ptr);
  if (it == live_.end()) {
    // A broken invariant (not something a request can cause): abort like MCSERVE_CHECK does.
    std::fprintf(stderr, "%s:%d: CudaRuntime::Free of %p, which is not a live device allocation\n", __FILE__,
                 __LINE__, ptr);
    std::abort();
  }
  const size_t size_class = it->second;
  live_.erase(it);
  in_use_ -= size_class;
  free_[size_class].push_back(ptr);
}

size_t CudaRuntime::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(alloc_mu_);
  return in_use_;
}

size_t CudaRuntime::bytes_reserved() const {
  std::lock_guard<std::mutex> lock(alloc_mu_);
  return reserved_;
}

absl::StatusOr<CudaRuntime::Staging*> CudaRuntime::NextStaging() {
  Staging* s = &staging_[next_staging_];
  next_staging_ = (next_staging_ + 1) % kStagingBuffers;
  if (s->pending) {
    MCSERVE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(s->done));
    s->pending = false;
  }
  return s;
}

absl::Status CudaRuntime::CopyHostToDevice(void* dst, const void* src, size_t bytes) {
  std::lock_guard<std::mutex> lock(stream_mu_);
  for (size_t off = 0; off < bytes; off += kStagingBytes) {
    const size_t n = std::min(kStagingBytes, bytes - off);
    MCSERVE_ASSIGN_OR_RETURN(Staging * s, NextStaging());
    std::memcpy(s->host, static_cast<const char*>(src) + off, n);
    MCSERVE_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(static_cast<char*>(dst) + off, s->host, n, cudaMemcpyHostToDevice, stream_));
    MCSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(s->done, stream_));
    s->pending = true;
  }
  return absl::OkStatus();
}

absl::Status CudaRuntime::CopyDeviceToHost(void* dst, const void* src, size_t bytes) {
  std::lock_guard<std::mutex> lock(stream_mu_);
  // Pipelined: chunk i is copied into one staging buffer while chunk i-1 is drained from the other.
  Staging* prev = nullptr;
  size_t prev_off = 0, prev_n = 0;
  auto drain = [&]() -> absl::Status {
    MCSERVE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(prev->done));
    prev->pending = false;
    std::memcpy(static_cast<char*>(dst) + prev_off, prev->host, prev_n);
    return absl::OkStatus();
  };
  for (size_t off = 0; off < bytes; off += kStagingBytes) {
    const size_t n = std::min(kStagingBytes, bytes - off);
    MCSERVE_ASSIGN_OR_RETURN(Staging * s, NextStaging());
    MCSERVE_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(s->host, static_cast<const char*>(src) + off, n, cudaMemcpyDeviceToHost, stream_));
    MCSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(s->done, stream_));
    s->pending = true;
    if (prev != nullptr) MCSERVE_RETURN_IF_ERROR(drain());
    prev = s;
    prev_off = off;
    prev_n = n;
  }
  if (prev != nullptr) MCSERVE_RETURN_IF_ERROR(drain());
  return absl::OkStatus();
}

absl::Status CudaRuntime::CopyDeviceToDevice(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(stream_mu_);
  MCSERVE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
  return absl::OkStatus();
}

absl::Status CudaRuntime::Zero(void* dst, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(stream_mu_);
  MCSERVE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dst, 0, bytes, stream_));
  return absl::OkStatus();
}

absl::Status CudaRuntime::Synchronize() {
  std::lock_guard<std::mutex> lock(stream_mu_);
  MCSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::StatusOr<float*> CudaRuntime::Scratch(size_t bytes) {
  if (bytes <= scratch_bytes_) return scratch_;
  if (scratch_ != nullptr) {
    MCSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));  // queued GEMMs may still read it
    MCSERVE_CUDA_RETURN_IF_ERROR(cudaFree(scratch_));
    scratch_ = nullptr;
    scratch_bytes_ = 0;
  }
  const size_t size_class = SizeClassBytes(bytes);
  void* p = nullptr;
  MCSERVE_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, size_class));
  scratch_ = static_cast<float*>(p);
  scratch_bytes_ = size_class;
  return scratch_;
}

absl::Status CudaRuntime::Gemm(const DeviceGemmArgs& g) {
  if (g.m < 0 || g.n < 0 || g.k < 0 || g.batch < 1 || g.stride_a < 0 || g.stride_b < 0 || g.stride_c < 0) {
    return absl::InvalidArgumentError(absl::StrCat("Gemm: bad sizes m=", g.m, " n=", g.n, " k=", g.k,
                                                   " batch=", g.batch));
  }
  if (g.m > INT_MAX || g.n > INT_MAX || g.k > INT_MAX || g.batch > INT_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("Gemm: m=", g.m, " n=", g.n, " k=", g.k, " batch=", g.batch,
                                                   " exceed cuBLAS's int"));
  }
  if (g.b_dtype == DType::kI32) return absl::InvalidArgumentError("Gemm: B must be F32, F16 or BF16, not I32");
  if (g.m == 0 || g.n == 0) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(stream_mu_);
  if (g.k == 0) {  // an empty product: C = 0, or C unchanged when accumulating
    if (!g.accumulate) {
      for (int64_t e = 0; e < g.batch; ++e) {
        MCSERVE_CUDA_RETURN_IF_ERROR(
            cudaMemsetAsync(g.c + e * g.stride_c, 0, static_cast<size_t>(g.m * g.n) * sizeof(float), stream_));
      }
    }
    return absl::OkStatus();
  }

  // cuBLAS's GemmEx needs Atype == Btype (its table has no F32 x F16/BF16 combination), and A is
  // F32 activations, so 16-bit B is widened to F32 in a device scratch first: exact, and the same
  // numerics as the CPU and emulated backends. (Narrowing A to B's type instead would be faster
  // for weight-bound decode GEMMs but changes the results; a later kernel can fuse the widening.)
  const void* b = g.b;
  int64_t stride_b = g.stride_b;
  if (g.b_dtype != DType::kF32) {
    const int64_t entry = g.n * g.k;
    const int64_t entries = g.stride_b == 0 ? 1 : g.batch;
    const int64_t total = entries * entry;
    MCSERVE_ASSIGN_OR_RETURN(float* wide, Scratch(static_cast<size_t>(total) * sizeof(float)));
    const int threads = 256;
    const int blocks = static_cast<int>(std::min<int64_t>((total + threads - 1) / threads, 4096));
    const auto* src = static_cast<const uint16_t*>(g.b);
    if (g.b_dtype == DType::kBF16) {
      WidenKernel<true><<<blocks, threads, 0, stream_>>>(src, g.stride_b, entry, total, wide);
    } else {
      WidenKernel<false><<<blocks, threads, 0, stream_>>>(src, g.stride_b, entry, total, wide);
    }
    MCSERVE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    b = wide;
    stride_b = g.stride_b == 0 ? 0 : entry;
  }

  // Row-major C[m,n] = A[m,k]·B[n,k]ᵀ on column-major cuBLAS. A row-major [r, c] buffer read as
  // column-major with leading dimension c is the c×r matrix Xᵀ. So the C buffer, read column-major
  // with ldc = n, is Cᵀ (n×m), and Cᵀ = (A·Bᵀ)ᵀ = B·Aᵀ. cuBLAS computes C' = op(A')·op(B') with
  // C' = Cᵀ (n×m, ldc = n):
  //   A' = the B buffer, read column-major with lda = k, is Bᵀ (k×n); op = T gives B (n×k);
  //   B' = the A buffer, read column-major with ldb = k, is Aᵀ (k×m); op = N keeps Aᵀ (k×m).
  // Hence transa = T, transb = N, (m', n', k') = (n, m, k), A' = b, B' = a, batch strides as given.
  const float alpha = 1.0f;
  const float beta = g.accumulate ? 1.0f : 0.0f;
  MCSERVE_CUBLAS_RETURN_IF_ERROR(cublasGemmStridedBatchedEx(
      cublas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(g.n), static_cast<int>(g.m), static_cast<int>(g.k),
      &alpha, b, CUDA_R_32F, static_cast<int>(g.k), static_cast<long long>(stride_b), g.a, CUDA_R_32F,
      static_cast<int>(g.k), static_cast<long long>(g.stride_a), &beta, g.c, CUDA_R_32F, static_cast<int>(g.n),
      static_cast<long long>(g.stride_c), static_cast<int>(g.batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DeviceRuntime*> CudaDeviceRuntime() {
  // Created once; never destroyed, so no CUDA call runs during static destruction.
  static const absl::StatusOr<DeviceRuntime*> runtime = []() -> absl::StatusOr<DeviceRuntime*> {
    int count = 0;
    const cudaError_t error = cudaGetDeviceCount(&count);
    if (error != cudaSuccess) {
      (void)cudaGetLastError();
      return absl::UnavailableError(absl::StrCat("no CUDA device: ", cudaGetErrorString(error)));
    }
    if (count == 0) return absl::UnavailableError("no CUDA device: cudaGetDeviceCount found none");
    auto rt = std::make_unique<CudaRuntime>();
    MCSERVE_RETURN_IF_ERROR(rt->Init());
    return rt.release();
  }();
  return runtime;
}

}  // namespace mcserve::kernels::internal

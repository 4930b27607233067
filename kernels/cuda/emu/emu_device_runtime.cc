// Emulated device runtime: an mmap'd arena with a caching allocator, memcpy copies, OpenBLAS Gemm.
#include "kernels/cuda/emu/emu_device_runtime.h"

#include <cblas.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <string>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include "absl/strings/str_cat.h"
#include "kernels/core/dtype.h"
#include "base/status_macros.h"
#include "kernels/cuda/size_class.h"

namespace mcserve::kernels::emu {
namespace {

// Small blocks are carved from chunks of this many bytes (virtual: pages are touched on use).
constexpr size_t kChunkBytes = size_t{64} << 20;
// Classes above this get a mapping of their own instead of a slice of a shared chunk.
constexpr size_t kDedicatedBytes = size_t{8} << 20;
constexpr size_t kPageBytes = 4096;
// Device addresses start near 0x6d63'0000'0000 ("mc") when the kernel honours the hint, so a device
// pointer is recognisable at a glance in a debugger or a sanitizer report.
constexpr uintptr_t kArenaHint = uintptr_t{0x6d63} << 32;

void Poison(const void* p, size_t bytes) {
#if defined(__SANITIZE_ADDRESS__)
  ASAN_POISON_MEMORY_REGION(p, bytes);
#else
  (void)p;
  (void)bytes;
#endif
}

void Unpoison(const void* p, size_t bytes) {
#if defined(__SANITIZE_ADDRESS__)
  ASAN_UNPOISON_MEMORY_REGION(p, bytes);
#else
  (void)p;
  (void)bytes;
#endif
}

std::string Range(const void* p, size_t bytes) {
  return absl::StrCat("[", absl::Hex(reinterpret_cast<uintptr_t>(p)), ", +", bytes, ")");
}

bool Overlap(const void* a, const void* b, size_t bytes) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + bytes && y < x + bytes;
}

}  // namespace

EmuDeviceRuntime::~EmuDeviceRuntime() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Chunk& c : chunks_) {
    Unpoison(c.base, c.bytes);  // the address range may be reused by later mappings
    munmap(c.base, c.bytes);
  }
}

absl::StatusOr<char*> EmuDeviceRuntime::TakeBlock(size_t size_class) {
  auto fl = free_.find(size_class);
  if (fl != free_.end() && !fl->second.empty()) {
    char* p = fl->second.back();
    fl->second.pop_back();
    return p;
  }
  const bool dedicated = size_class > kDedicatedBytes;
  Chunk* chunk = nullptr;
  if (!dedicated && bump_chunk_ >= 0) {
    Chunk& c = chunks_[bump_chunk_];
    if (c.bytes - c.used >= size_class) chunk = &c;
  }
  if (chunk == nullptr) {
    const size_t bytes = dedicated ? (size_class + kPageBytes - 1) / kPageBytes * kPageBytes : kChunkBytes;
    void* hint = reinterpret_cast<void*>(kArenaHint);
    if (!chunks_.empty()) {
      const Chunk& last = chunks_.back();
      hint = last.base + (last.bytes + kChunkBytes - 1) / kChunkBytes * kChunkBytes;
    }
    void* base = mmap(hint, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
      return absl::ResourceExhaustedError(
          absl::StrCat("emulated device: cannot map ", bytes, " bytes of device memory: ", std::strerror(errno)));
    }
    Poison(base, bytes);  // nothing in a fresh chunk is addressable until it is handed out
    chunks_.push_back(Chunk{static_cast<char*>(base), bytes, 0});
    chunk = &chunks_.back();
    if (!dedicated) bump_chunk_ = static_cast<int>(chunks_.size()) - 1;
  }
  char* p = chunk->base + chunk->used;
  chunk->used += size_class;
  reserved_ += size_class;
  return p;
}

absl::StatusOr<void*> EmuDeviceRuntime::Allocate(size_t bytes) {
  const size_t size_class = internal::SizeClassBytes(bytes);
  if (size_class == 0) {
    return absl::ResourceExhaustedError(absl::StrCat("emulated device: cannot allocate ", bytes, " bytes"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  MCSERVE_ASSIGN_OR_RETURN(char* p, TakeBlock(size_class));
  // The block stays poisoned past the request, so an access to its slack is reported too.
  Unpoison(p, bytes);
  live_.emplace(reinterpret_cast<uintptr_t>(p), Live{bytes, size_class});
  in_use_ += size_class;
  return static_cast<void*>(p);
}

void EmuDeviceRuntime::Free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(reinterpret_cast<uintptr_t>(ptr));
  MCSERVE_CHECK(it != live_.end() && "Free of a pointer that is not a live device allocation");
  const size_t size_class = it->second.size_class;
  live_.erase(it);
  in_use_ -= size_class;
  Poison(ptr, size_class);
  free_[size_class].push_back(static_cast<char*>(ptr));
}

size_t EmuDeviceRuntime::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_use_;
}

size_t EmuDeviceRuntime::bytes_reserved() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reserved_;
}

bool EmuDeviceRuntime::IsDeviceRangeLocked(const void* ptr, size_t bytes) const {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  auto it = live_.upper_bound(p);  // first block starting after p
  if (it == live_.begin()) return false;
  --it;
  const uintptr_t off = p - it->first;
  return off <= it->second.requested && bytes <= it->second.requested - off;
}

bool EmuDeviceRuntime::IsDeviceRange(const void* ptr, size_t bytes) const {
  std::lock_guard<std::mutex> lock(mu_);
  return IsDeviceRangeLocked(ptr, bytes);
}

bool EmuDeviceRuntime::InArena(const void* ptr) const {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(mu_);
  for (const Chunk& c : chunks_) {
    const auto base = reinterpret_cast<uintptr_t>(c.base);
    if (p >= base && p - base < c.bytes) return true;
  }
  return false;
}

absl::Status EmuDeviceRuntime::CheckDevice(const char* op, const char* what, const void* ptr,
                                           size_t bytes) const {
  if (IsDeviceRange(ptr, bytes)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", what, " ", Range(ptr, bytes),
                                                 " is not inside a live device allocation"));
}

absl::Status EmuDeviceRuntime::CheckHost(const char* op, const char* what, const void* ptr,
                                         size_t bytes) const {
  if (ptr != nullptr && !InArena(ptr)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", what, " ", Range(ptr, bytes),
                                                 ptr == nullptr ? " is null" : " is device memory, not host memory"));
}

absl::Status EmuDeviceRuntime::CopyHostToDevice(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  MCSERVE_RETURN_IF_ERROR(CheckDevice("CopyHostToDevice", "destination", dst, bytes));
  MCSERVE_RETURN_IF_ERROR(CheckHost("CopyHostToDevice", "source", src, bytes));
  std::memcpy(dst, src, bytes);
  return absl::OkStatus();
}

absl::Status EmuDeviceRuntime::CopyDeviceToHost(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  MCSERVE_RETURN_IF_ERROR(CheckHost("CopyDeviceToHost", "destination", dst, bytes));
  MCSERVE_RETURN_IF_ERROR(CheckDevice("CopyDeviceToHost", "source", src, bytes));
  std::memcpy(dst, src, bytes);
  return absl::OkStatus();
}

absl::Status EmuDeviceRuntime::CopyDeviceToDevice(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  MCSERVE_RETURN_IF_ERROR(CheckDevice("CopyDeviceToDevice", "destination", dst, bytes));
  MCSERVE_RETURN_IF_ERROR(CheckDevice("CopyDeviceToDevice", "source", src, bytes));
  if (Overlap(dst, src, bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("CopyDeviceToDevice: ranges ", Range(dst, bytes), " and ",
                                                   Range(src, bytes), " overlap"));
  }
  std::memcpy(dst, src, bytes);
  return absl::OkStatus();
}

absl::Status EmuDeviceRuntime::Zero(void* dst, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  MCSERVE_RETURN_IF_ERROR(CheckDevice("Zero", "destination", dst, bytes));
  std::memset(dst, 0, bytes);
  return absl::OkStatus();
}

namespace {

// Bytes spanned by `batch` entries of `entry` elements of `elem` bytes, `stride` elements apart.
size_t SpanBytes(int64_t batch, int64_t stride, int64_t entry, int64_t elem) {
  return static_cast<size_t>(((batch - 1) * stride + entry) * elem);
}

// Widens rows of a BF16/F16 matrix to F32; src, dst: [rows, k].
void Widen(DType dtype, const uint16_t* src, int64_t count, float* dst) {
  if (dtype == DType::kBF16) {
    for (int64_t i = 0; i < count; ++i) dst[i] = Bf16ToF32(src[i]);
  } else {
    for (int64_t i = 0; i < count; ++i) dst[i] = F16ToF32(src[i]);
  }
}

}  // namespace

absl::Status EmuDeviceRuntime::Gemm(const DeviceGemmArgs& g) {
  if (g.m < 0 || g.n < 0 || g.k < 0 || g.batch < 1 || g.stride_a < 0 || g.stride_b < 0 || g.stride_c < 0) {
    return absl::InvalidArgumentError(absl::StrCat("Gemm: bad sizes m=", g.m, " n=", g.n, " k=", g.k,
                                                   " batch=", g.batch, " strides ", g.stride_a, "/",
                                                   g.stride_b, "/", g.stride_c));
  }
  if (g.m > INT_MAX || g.n > INT_MAX || g.k > INT_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("Gemm: m=", g.m, " n=", g.n, " k=", g.k, " exceed int"));
  }
  if (g.b_dtype == DType::kI32) return absl::InvalidArgumentError("Gemm: B must be F32, F16 or BF16, not I32");
  if (g.m == 0 || g.n == 0) return absl::OkStatus();
  const int64_t b_elem = DTypeSize(g.b_dtype);
  MCSERVE_RETURN_IF_ERROR(CheckDevice("Gemm", "C", g.c, SpanBytes(g.batch, g.stride_c, g.m * g.n, 4)));
  if (g.k > 0) {
    MCSERVE_RETURN_IF_ERROR(CheckDevice("Gemm", "A", g.a, SpanBytes(g.batch, g.stride_a, g.m * g.k, 4)));
    MCSERVE_RETURN_IF_ERROR(CheckDevice("Gemm", "B", g.b, SpanBytes(g.batch, g.stride_b, g.n * g.k, b_elem)));
  }
  const int m = static_cast<int>(g.m), n = static_cast<int>(g.n), k = static_cast<int>(g.k);
  const float beta = g.accumulate ? 1.0f : 0.0f;
  if (k == 0) {  // C = 0·… (+ C): leave C or zero it, without asking BLAS about empty products
    if (!g.accumulate) {
      for (int64_t e = 0; e < g.batch; ++e) std::fill_n(g.c + e * g.stride_c, g.m * g.n, 0.0f);
    }
    return absl::OkStatus();
  }
  // 16-bit B is widened a block of rows at a time (at most ~4 MiB of F32) into a thread-local buffer.
  thread_local std::vector<float> widened;
  const int64_t rows_per_block = std::max<int64_t>(1, std::min<int64_t>(g.n, (int64_t{1} << 20) / g.k));
  for (int64_t e = 0; e < g.batch; ++e) {
    const float* a = g.a + e * g.stride_a;
    float* c = g.c + e * g.stride_c;
    if (g.b_dtype == DType::kF32) {
      const float* b = static_cast<const float*>(g.b) + e * g.stride_b;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, k, b, k, beta, c, n);
      continue;
    }
    const uint16_t* b = static_cast<const uint16_t*>(g.b) + e * g.stride_b;
    widened.resize(static_cast<size_t>(rows_per_block * g.k));
    for (int64_t r0 = 0; r0 < g.n; r0 += rows_per_block) {
      const int64_t rows = std::min(rows_per_block, g.n - r0);
      Widen(g.b_dtype, b + r0 * g.k, rows * g.k, widened.data());
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, static_cast<int>(rows), k, 1.0f, a, k,
                  widened.data(), k, beta, c + r0, n);
    }
  }
  return absl::OkStatus();
}

EmuDeviceRuntime& EmuRuntime() {
  static EmuDeviceRuntime* const runtime = new EmuDeviceRuntime();  // never destroyed: outlives users
  return *runtime;
}

}  // namespace mcserve::kernels::emu

// CUDA Linear: out[m, n] (+)= x[m, k] · w[n, k]ᵀ, F32 accumulation, w stored F32/BF16/F16.
//
// Decode-sized batches (m ≤ kGemvMaxRows = 8) run our own GEMV kernel, which reads every weight once,
// in its stored dtype, for all m rows of x together. A decode step is bound by weight bytes: with
// 16-bit weights it reads 2 bytes per weight, against 2 (read) + 4 (write F32 scratch) + 4 (read) for
// the runtime's Gemm, which widens 16-bit B per call. At m rows the GEMV does 2m FLOP per weight, i.e.
// m FLOP/byte for BF16 (m/2 for F32): up to m = 8 that stays under the FP32 CUDA-core ridge point of
// current GPUs (≈ 13 FLOP/byte on an A100, ≈ 20 on an H100), so the kernel remains memory bound and
// beats widen + cuBLAS; the m accumulators per lane also stay in registers. It is the same threshold
// as the CPU backend's GEMV (linear_cpu.cc). Larger m goes to the runtime's Gemm (cuBLAS on a GPU,
// OpenBLAS under the emulator), which widens 16-bit B once per call — amortised over m rows.
//
// GEMV launch shape: a segment of `width` consecutive lanes per R output rows (R = 1 at m = 1, else
// 4: the x vectors a lane loads serve R rows), width = the smallest power of two ≥ k/16, at most 32
// (a short row gives each lane 8–16 elements instead of leaving lanes idle, with fewer shuffles; a
// whole warp from k = 257 up); grid = ceil(n / (R·128 / width)) blocks of 128 threads, no shared
// memory. Lane l of a segment reads each of its rows' elements in 16-byte vectors (4 F32
// or 8 BF16/F16 elements) at l·V, l·V + width·V, ... when w, x and the row length allow it (k a
// multiple of V and 16-byte-aligned bases), else element by element at l, l + width, ...; for each
// weight it FMAs all m rows of x (read through the read-only cache) into m register accumulators,
// then an xor-shuffle tree inside the segment reduces each accumulator (a fixed order: the result
// does not depend on scheduling; segments of rows past n join the shuffles without loading) and
// lane i mod width writes out[i, row]. k = 0 gives out = 0 (or out unchanged when accumulating).
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/cuda/cuda_compat.h"
#include "kernels/core/device_runtime.h"
#include "kernels/linear/linear.h"
#include "kernels/linear/linear_math.h"

namespace {

namespace km = ::mcserve::kernels;
namespace lm = ::mcserve::kernels::linear_math;

constexpr int64_t kGemvMaxRows = 8;  // m up to this runs GemvKernel (see the file comment)
constexpr int kGemvThreads = 128;    // threads per block
constexpr int64_t kGemvMinPerLane = 16;  // a row's lanes: enough for ≥ this many elements each

// Stored weight types: kVec elements per 16-byte load, and element widening (linear_math.h).
struct F32Weights {
  using T = float;
  static constexpr int kVec = 4;
  static __device__ __forceinline__ float One(const float* w, int64_t c) { return lm::WeightToF32(__ldg(w + c)); }
  // out[0..4) = w[c..c+4); w + c 16-byte aligned.
  static __device__ __forceinline__ void Vec(const float* w, int64_t c, float* out) {
    const float4 v = __ldg(reinterpret_cast<const float4*>(w + c));
    out[0] = v.x;
    out[1] = v.y;
    out[2] = v.z;
    out[3] = v.w;
  }
};

// BF16 and F16: one 16-byte load of 8 elements, two per 32-bit word (little-endian: low half first).
template <bool kBf16>
struct HalfWeights {
  using T = uint16_t;
  static constexpr int kVec = 8;
  static __device__ __forceinline__ float Widen(uint16_t v) {
    return kBf16 ? lm::Bf16WeightToF32(v) : lm::F16WeightToF32(v);
  }
  static __device__ __forceinline__ float One(const uint16_t* w, int64_t c) { return Widen(__ldg(w + c)); }
  // out[0..8) = widened w[c..c+8); w + c 16-byte aligned.
  static __device__ __forceinline__ void Vec(const uint16_t* w, int64_t c, float* out) {
    const int4 v = __ldg(reinterpret_cast<const int4*>(w + c));
    const unsigned words[4] = {static_cast<unsigned>(v.x), static_cast<unsigned>(v.y), static_cast<unsigned>(v.z),
                               static_cast<unsigned>(v.w)};
    for (int j = 0; j < 4; ++j) {
      out[2 * j] = Widen(static_cast<uint16_t>(words[j] & 0xffffu));
      out[2 * j + 1] = Widen(static_cast<uint16_t>(words[j] >> 16));
    }
  }
};

// out[i, row] (+)= Σ_c x[i, c]·w[row, c] for i < M; a segment of `width` lanes (a power of two ≤ 32)
// per R consecutive output rows (file comment). x: [M, k] F32; w: [n, k] of W::T; out: [M, n].
// vec16: 16-byte loads (k % W::kVec == 0 and x, w 16-byte aligned). Each x vector a lane loads
// serves its R rows, so x is read R times less often than the weights; a row past n re-reads row
// n − 1 and writes nothing. Every row's sum is the one an R = 1 launch computes (same lanes, same
// shuffle tree).
template <class W, int M, int R>
__global__ void __launch_bounds__(kGemvThreads)
    GemvKernel(const float* __restrict__ x, const typename W::T* __restrict__ w, int64_t k, int64_t n, int width,
               bool vec16, bool accumulate, float* __restrict__ out) {
  const int sub = threadIdx.x % width;  // lane within the rows' segment
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / width * R;
  // Segments wholly past n still take part in the shuffles (full-warp masks) but load and store nothing.
  const bool valid = first < n;
  const typename W::T* wr[R];
  for (int r = 0; r < R; ++r) wr[r] = w + (first + r < n ? first + r : n - 1) * k;
  float acc[R][M];
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < M; ++i) acc[r][i] = 0.0f;
  }
  if (valid && vec16) {
    constexpr int V = W::kVec;
    for (int64_t c = static_cast<int64_t>(sub) * V; c < k; c += static_cast<int64_t>(width) * V) {
      float wv[R][V];
      for (int r = 0; r < R; ++r) W::Vec(wr[r], c, wv[r]);
      for (int i = 0; i < M; ++i) {
        const float* xr = x + i * k + c;
        for (int j = 0; j < V; j += 4) {
          const float4 xv = __ldg(reinterpret_cast<const float4*>(xr + j));
          for (int r = 0; r < R; ++r) {
            acc[r][i] = fmaf(xv.x, wv[r][j], acc[r][i]);
            acc[r][i] = fmaf(xv.y, wv[r][j + 1], acc[r][i]);
            acc[r][i] = fmaf(xv.z, wv[r][j + 2], acc[r][i]);
            acc[r][i] = fmaf(xv.w, wv[r][j + 3], acc[r][i]);
          }
        }
      }
    }
  } else if (valid) {
    for (int64_t c = sub; c < k; c += width) {
      float wc[R];
      for (int r = 0; r < R; ++r) wc[r] = W::One(wr[r], c);
      for (int i = 0; i < M; ++i) {
        const float xc = __ldg(x + i * k + c);
        for (int r = 0; r < R; ++r) acc[r][i] = fmaf(xc, wc[r], acc[r][i]);
      }
    }
  }
  // xor offsets below `width` stay inside the segment; every lane of the warp takes part.
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < M; ++i) {
      for (int offset = width / 2; offset > 0; offset >>= 1) {
        acc[r][i] += __shfl_xor_sync(0xffffffffu, acc[r][i], offset);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    if (first + r >= n) return;
    for (int i = 0; i < M; ++i) {
      if (sub == (r * M + i) % width) {
        float& o = out[i * n + first + r];
        o = accumulate ? o + acc[r][i] : acc[r][i];
      }
    }
  }
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Lanes per output row: the power of two ≥ k / kGemvMinPerLane, at most a warp.
int SegmentWidth(int64_t k) {
  int width = 1;
  while (width < 32 && static_cast<int64_t>(width) * kGemvMinPerLane < k) width *= 2;
  return width;
}

// Rows per segment: one at m = 1 (one x row is cheap to re-read; measured at the copy's rate on an
// H200), four from m = 2 (x is re-read a quarter as often: docs/cuda.md).
template <int M>
constexpr int kRowsPerSegment = M == 1 ? 1 : 4;

template <class W, int M>
absl::Status LaunchGemv(const float* x, const typename W::T* w, int64_t k, int64_t n, bool accumulate, float* out,
                        cudaStream_t stream) {
  constexpr int R = kRowsPerSegment<M>;
  const bool vec16 = k % W::kVec == 0 && Aligned16(x) && Aligned16(w);
  const int width = SegmentWidth(k);
  const int64_t rows_per_block = kGemvThreads / width * R;
  const int64_t grid = (n + rows_per_block - 1) / rows_per_block;
  if (grid > 0x7fffffff) return absl::InvalidArgumentError(absl::StrCat("Linear: ", n, " output rows"));
  auto* kernel = &GemvKernel<W, M, R>;
  MCSERVE_LAUNCH(kernel, static_cast<unsigned>(grid), kGemvThreads, 0, stream)
  (x, w, k, n, width, vec16, accumulate, out);
  return ::mcserve::kernels::MCSERVE_CUDA_NS::TakeLaunchStatus("Linear GEMV");
}

// out[m, n] (+)= x[m, k]·w[n, k]ᵀ for 1 ≤ m ≤ kGemvMaxRows.
template <class W>
absl::Status Gemv(int64_t m, const float* x, const typename W::T* w, int64_t k, int64_t n, bool accumulate,
                  float* out, cudaStream_t stream) {
  switch (m) {
    case 1: return LaunchGemv<W, 1>(x, w, k, n, accumulate, out, stream);
    case 2: return LaunchGemv<W, 2>(x, w, k, n, accumulate, out, stream);
    case 3: return LaunchGemv<W, 3>(x, w, k, n, accumulate, out, stream);
    case 4: return LaunchGemv<W, 4>(x, w, k, n, accumulate, out, stream);
    case 5: return LaunchGemv<W, 5>(x, w, k, n, accumulate, out, stream);
    case 6: return LaunchGemv<W, 6>(x, w, k, n, accumulate, out, stream);
    case 7: return LaunchGemv<W, 7>(x, w, k, n, accumulate, out, stream);
    case 8: return LaunchGemv<W, 8>(x, w, k, n, accumulate, out, stream);
  }
  return absl::InternalError(absl::StrCat("Linear: GEMV for m = ", m));
}

}  // namespace

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

using ::mcserve::kernels::MCSERVE_CUDA_NS::KernelStream;

absl::Status LinearCuda(const Context& ctx, const LinearArgs& args) {
  const Tensor &x = *args.x, &w = *args.w;
  const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
  if (m == 0 || n == 0) return absl::OkStatus();
  if (m <= kGemvMaxRows) {
    MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, KernelStream());
    const float* xp = Data<float>(x);
    float* out = Data<float>(*args.out);
    switch (w.dtype()) {
      case DType::kF32:
        return Gemv<F32Weights>(m, xp, Data<float>(w), k, n, args.accumulate, out, stream);
      case DType::kBF16:
        return Gemv<HalfWeights<true>>(m, xp, Data<uint16_t>(w), k, n, args.accumulate, out, stream);
      case DType::kF16:
        return Gemv<HalfWeights<false>>(m, xp, Data<uint16_t>(w), k, n, args.accumulate, out, stream);
      case DType::kI32:
        return absl::InvalidArgumentError("Linear: I32 weights");
    }
  }
  MCSERVE_ASSIGN_OR_RETURN(DeviceRuntime * rt, RuntimeFor(MCSERVE_CUDA_EMULATED ? Device::kCudaEmu : Device::kCuda));
  DeviceGemmArgs g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = Data<float>(x);
  g.b = RawData(w);
  g.b_dtype = w.dtype();
  g.c = Data<float>(*args.out);
  g.stride_a = m * k;
  g.stride_b = n * k;
  g.stride_c = m * n;
  g.accumulate = args.accumulate;
  absl::Status s = rt->Gemm(g);
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat("Linear: ", s.message()));
  return absl::OkStatus();
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS

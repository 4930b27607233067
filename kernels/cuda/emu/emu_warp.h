// CUDA emulator: warp shuffles, votes and __syncwarp (included by emu.h only).
// Every call is a warp collective: the calling fiber yields, and the collective completes when
// every lane named in `mask` has arrived at the same collective with the same mask, or has exited
// (lanes past the end of a partial last warp count as exited, so full masks work there). Misuse
// CUDA leaves undefined (own lane not in mask, overlapping different masks, different collectives,
// bad width) fails the launch. Reading a lane that does not take part returns an undefined value
// that differs between the two schedules.
#pragma once

#include <cstdint>
#include <cstring>
#include <source_location>
#include <type_traits>

namespace mcserve::kernels::emu {

enum class WarpOp : uint8_t {
  kShflIdx, kShflUp, kShflDown, kShflXor, kBallot, kAny, kAll, kSync, kActiveMask
};

namespace internal {
// Arrives at a warp collective with this lane's 64-bit payload; returns this lane's result.
uint64_t WarpCollective(WarpOp op, unsigned mask, uint64_t value, int arg, int width);

template <typename T>
inline T Shuffle(WarpOp op, unsigned mask, T var, int arg, int width) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8,
                "warp shuffles move trivially copyable values of at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &var, sizeof(T));
  const uint64_t r = WarpCollective(op, mask, bits, arg, width);
  T out;
  std::memcpy(&out, &r, sizeof(T));
  return out;
}
}  // namespace internal

// Value of `var` in lane (srcLane mod width) of the caller's width-wide segment.
template <typename T>
inline T __shfl_sync(unsigned mask, T var, int srcLane, int width = 32) {
  return internal::Shuffle(WarpOp::kShflIdx, mask, var, srcLane, width);
}
// Value from lane - delta; the caller's own value if that leaves its segment.
template <typename T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  return internal::Shuffle(WarpOp::kShflUp, mask, var, static_cast<int>(delta), width);
}
// Value from lane + delta; the caller's own value if that leaves its segment.
template <typename T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  return internal::Shuffle(WarpOp::kShflDown, mask, var, static_cast<int>(delta), width);
}
// Value from lane ^ laneMask; the caller's own value if that is past its segment.
template <typename T>
inline T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = 32) {
  return internal::Shuffle(WarpOp::kShflXor, mask, var, laneMask, width);
}
// Bit i set iff lane i is in mask, took part and passed predicate != 0.
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return static_cast<unsigned>(
      internal::WarpCollective(WarpOp::kBallot, mask, predicate != 0, 0, 32));
}
// Whether any / all of the lanes taking part passed predicate != 0.
inline int __any_sync(unsigned mask, int predicate) {
  return static_cast<int>(internal::WarpCollective(WarpOp::kAny, mask, predicate != 0, 0, 32));
}
inline int __all_sync(unsigned mask, int predicate) {
  return static_cast<int>(internal::WarpCollective(WarpOp::kAll, mask, predicate != 0, 0, 32));
}
// Waits for the lanes in mask (a warp-level barrier).
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  (void)internal::WarpCollective(WarpOp::kSync, mask, 0, 0, 32);
}
// The lanes of the caller's warp that execute this call together: the caller yields until no lane
// of its warp can run (each has exited or waits at a barrier or a collective); the result names
// the lanes then waiting at __activemask. So `if (lane < 16) m = __activemask();` gives 0xffff
// when lanes 16..31 go on to exit or to wait, much as a diverged warp would on a GPU.
// Lanes waiting at different __activemask() calls (told apart by source line and column) are
// released one call site at a time, the smallest line first, so lanes that diverged around an
// earlier call reconverge at a later one.
inline unsigned __activemask(std::source_location site = std::source_location::current()) {
  const uint64_t call_site = (uint64_t{site.line()} << 32) | site.column();
  return static_cast<unsigned>(
      internal::WarpCollective(WarpOp::kActiveMask, ~0u, call_site, 0, 32));
}
// The caller's lane in its warp (threads are numbered x fastest, then y, then z).
unsigned LaneId();

}  // namespace mcserve::kernels::emu

using mcserve::kernels::emu::__activemask;
using mcserve::kernels::emu::__all_sync;
using mcserve::kernels::emu::__any_sync;
using mcserve::kernels::emu::__ballot_sync;
using mcserve::kernels::emu::__shfl_down_sync;
using mcserve::kernels::emu::__shfl_sync;
using mcserve::kernels::emu::__shfl_up_sync;
using mcserve::kernels::emu::__shfl_xor_sync;
using mcserve::kernels::emu::__syncwarp;

// CUDA emulator: warp collectives (shuffles, votes, __syncwarp). Lane semantics follow PTX
// shfl.sync: a source outside the caller's segment yields the caller's own value.
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cuda/emu/emu.h"
#include "kernels/cuda/emu/emu_internal.h"

namespace mcserve::kernels::emu {
namespace internal {
namespace {

constexpr int kWarp = 32;

// Lanes of `warp` that exist in a block of n threads.
int LanesIn(int n, int warp) { return n - warp * kWarp < kWarp ? n - warp * kWarp : kWarp; }

// Whether lane b (state/op) has arrived at the same collective as a request with op/mask.
bool SameCollective(const EmuThread& b, WarpOp op, unsigned mask) {
  return b.state == ThreadState::kWarp && b.warp.op == op && b.warp.mask == mask;
}

// Result of a shuffle for `lane`, given the lanes taking part (PTX shfl.sync with
// c = ((32 - width) << 8) | (up ? 0 : 31)).
uint64_t ShuffleResult(const BlockRun& run, int base, int lane, unsigned participants) {
  const WarpRequest& r = run.threads[base + lane].warp;
  const int segmask = kWarp - r.width;  // the lane bits that select the segment
  const int b = r.arg & 31;
  const int max_lane_up = lane & segmask;
  const int max_lane = (lane & segmask) | (31 & ~segmask);
  int src = lane;
  bool in_range = true;
  switch (r.op) {
    case WarpOp::kShflIdx: src = (lane & segmask) | (b & ~segmask); break;
    case WarpOp::kShflUp: src = lane - b; in_range = src >= max_lane_up; break;
    case WarpOp::kShflDown: src = lane + b; in_range = src <= max_lane; break;
    case WarpOp::kShflXor: src = lane ^ b; in_range = src <= max_lane; break;
    default: break;
  }
  if (!in_range) return r.value;
  if ((participants >> src) & 1u) return run.threads[base + src].warp.value;
  // The source lane does not take part: undefined in CUDA; differs between the schedules.
  return run.schedule == Schedule::kForward ? r.value : ~uint64_t{0};
}

void Complete(BlockRun& run, int base, unsigned participants) {
  uint32_t votes = 0;
  for (int j = 0; j < kWarp; ++j) {
    if (((participants >> j) & 1u) && run.threads[base + j].warp.value != 0) votes |= 1u << j;
  }
  for (int j = 0; j < kWarp; ++j) {
    if (!((participants >> j) & 1u)) continue;
    EmuThread& t = run.threads[base + j];
    switch (t.warp.op) {
      case WarpOp::kBallot: t.warp.result = votes; break;
      case WarpOp::kAny: t.warp.result = votes != 0; break;
      case WarpOp::kAll: t.warp.result = votes == participants; break;
      case WarpOp::kSync: t.warp.result = 0; break;
      default: t.warp.result = ShuffleResult(run, base, j, participants); break;
    }
  }
  for (int j = 0; j < kWarp; ++j) {
    if ((participants >> j) & 1u) run.threads[base + j].state = ThreadState::kRunnable;
  }
}

std::string StateName(const EmuThread& t) {
  switch (t.state) {
    case ThreadState::kRunnable: return "running";
    case ThreadState::kBarrier: return "at __syncthreads()";
    case ThreadState::kDone: return "exited";
    case ThreadState::kWarp:
      return absl::StrFormat("at %s(mask=0x%08x)", WarpOpName(t.warp.op), t.warp.mask);
  }
  return "?";
}

}  // namespace

const char* WarpOpName(WarpOp op) {
  switch (op) {
    case WarpOp::kShflIdx: return "__shfl_sync";
    case WarpOp::kShflUp: return "__shfl_up_sync";
    case WarpOp::kShflDown: return "__shfl_down_sync";
    case WarpOp::kShflXor: return "__shfl_xor_sync";
    case WarpOp::kBallot: return "__ballot_sync";
    case WarpOp::kAny: return "__any_sync";
    case WarpOp::kAll: return "__all_sync";
    case WarpOp::kSync: return "__syncwarp";
    case WarpOp::kActiveMask: return "__activemask";
  }
  return "?";
}

void CompleteWarpGroups(BlockRun& run, int warp) {
  const int base = warp * kWarp;
  const int lanes = LanesIn(run.n, warp);
  // Lanes still running: no collective whose mask names one of them can complete yet. Checking this
  // first keeps a warp's arrivals O(lanes) each instead of O(lanes²).
  unsigned running = 0;
  for (int l = 0; l < lanes; ++l) running |= (run.threads[base + l].state == ThreadState::kRunnable ? 1u : 0u) << l;
  for (int l = 0; l < lanes; ++l) {
    const EmuThread& a = run.threads[base + l];
    if (a.state != ThreadState::kWarp || a.warp.op == WarpOp::kActiveMask) continue;
    const WarpOp op = a.warp.op;
    const unsigned mask = a.warp.mask;
    if ((mask & running) != 0) continue;
    unsigned participants = 0;
    bool complete = true;
    for (int j = 0; j < lanes && complete; ++j) {  // lanes >= `lanes` do not exist: as if exited
      if (!((mask >> j) & 1u)) continue;
      const EmuThread& b = run.threads[base + j];
      if (b.state == ThreadState::kDone) continue;
      if (SameCollective(b, op, mask)) {
        participants |= 1u << j;
      } else {
        complete = false;  // not arrived yet (or at another collective: a deadlock if it stays)
      }
    }
    if (complete) Complete(run, base, participants);
  }
  // __activemask: completes once no lane of the warp can run, for the lanes waiting at the call
  // site with the smallest (line, column); those lanes may then join lanes waiting further down,
  // so structured divergence reconverges (CUDA itself guarantees no convergence here).
  uint64_t first_site = ~uint64_t{0};
  for (int l = 0; l < lanes; ++l) {
    const EmuThread& a = run.threads[base + l];
    if (a.state == ThreadState::kRunnable) return;
    if (a.state == ThreadState::kWarp && a.warp.op == WarpOp::kActiveMask &&
        a.warp.value < first_site) {
      first_site = a.warp.value;
    }
  }
  unsigned same_site = 0;
  for (int l = 0; l < lanes; ++l) {
    const EmuThread& a = run.threads[base + l];
    if (a.state == ThreadState::kWarp && a.warp.op == WarpOp::kActiveMask &&
        a.warp.value == first_site) {
      same_site |= 1u << l;
    }
  }
  for (int l = 0; l < lanes; ++l) {
    if (!((same_site >> l) & 1u)) continue;
    run.threads[base + l].warp.result = same_site;
    run.threads[base + l].state = ThreadState::kRunnable;
  }
}

std::string DescribeWarpWait(const BlockRun& run, int t) {
  const EmuThread& a = run.threads[t];
  const int base = (t / kWarp) * kWarp;
  const int lanes = LanesIn(run.n, t / kWarp);
  std::string msg = absl::StrFormat("%s (warp %d lane %d) waits at %s(mask=0x%08x) for", ThreadName(run, t),
                                    t / kWarp, t % kWarp, WarpOpName(a.warp.op), a.warp.mask);
  int listed = 0;
  for (int j = 0; j < lanes; ++j) {
    const EmuThread& b = run.threads[base + j];
    if (!((a.warp.mask >> j) & 1u) || b.state == ThreadState::kDone ||
        SameCollective(b, a.warp.op, a.warp.mask)) {
      continue;
    }
    if (listed++ < 4) absl::StrAppend(&msg, listed > 1 ? "," : "", " lane ", j, " (", StateName(b), ")");
  }
  if (listed > 4) absl::StrAppend(&msg, " and ", listed - 4, " more");
  return msg;
}

uint64_t WarpCollective(WarpOp op, unsigned mask, uint64_t value, int arg, int width) {
  if (g_run == nullptr || g_current < 0) return value;  // called outside a kernel
  BlockRun& run = *g_run;
  const int lane = g_current % kWarp;
  if (!((mask >> lane) & 1u)) {
    SetRunError(absl::InternalError(
        absl::StrFormat("CUDA emulator: %s calls %s with mask 0x%08x, which does not name its "
                        "own lane %d", ThreadName(run, g_current), WarpOpName(op), mask, lane)));
    AbandonRunning();
  }
  if (width < 1 || width > kWarp || (width & (width - 1)) != 0) {
    SetRunError(absl::InternalError(absl::StrFormat(
        "CUDA emulator: %s calls %s with width %d (must be a power of two <= 32)",
        ThreadName(run, g_current), WarpOpName(op), width)));
    AbandonRunning();
  }
  EmuThread& me = run.threads[g_current];
  me.warp = WarpRequest{op, mask, value, arg, width, 0};
  me.state = ThreadState::kWarp;
  Pool().Yield();
  return me.warp.result;
}

}  // namespace internal

unsigned LaneId() {
  return internal::g_current < 0 ? 0u : static_cast<unsigned>(internal::g_current % 32);
}

}  // namespace mcserve::kernels::emu

// LatticeMemory: Lattice's orthogonal state recurrence with normalised projection (docs/model-format.md,
// `lattice`) over a varlen batch whose per-sequence slots live in a state slot. Per head the state is
// M [m, d]: m unit-norm memory slots (rows) of dimension d, fp32; each token writes into every slot
// only the part of its signal orthogonal to the slot, renormalises the slot and reads o = Mᵀ q after
// the write. The recurrence is non-linear in M, so prefill is an exact sequential scan.
// Any thread; calls sharing a Context.pool must not overlap.
#pragma once

#include "absl/status/status.h"
#include "kernels/core/batch_layout.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"

namespace mcserve::kernels {

// The inner loss the step descends (Lattice eq. 6, 9, 11): decoding ‖φ(S)k − v‖², encoding
// ‖φ(S)ᵀv − k‖², similarity −⟨φ(S)ᵀv, k⟩.
enum class LatticeMemoryVariant { kDec, kEnc, kSim };

struct LatticeMemoryArgs {
  LatticeMemoryVariant variant = LatticeMemoryVariant::kDec;
  bool analytic_renorm = false;     // β from Pythagoras instead of the recomputed norm
  bool normalized_readout = false;  // o = Σ q_i s_i/‖s_i‖ instead of Σ q_i s_i
  const Tensor* q = nullptr;        // [T, H, m] F32
  const Tensor* k = nullptr;        // [T, H, m] F32
  const Tensor* v = nullptr;        // [T, H, d] F32
  const Tensor* gamma = nullptr;    // [T, H] F32 step size γ
  const Tensor* mu = nullptr;       // [T, H] F32 forget gate μ, or null (μ = 1)
  BatchLayout layout;
  Tensor* state = nullptr;          // [num_slots, H, m, d] F32, in/out
  Tensor* out = nullptr;            // [T, H, d] F32
};

// Runs every sequence of args.layout through its slot's memory, token by token.
absl::Status LatticeMemory(const Context& ctx, const LatticeMemoryArgs& args);

namespace internal {
absl::Status LatticeMemoryCpu(const Context& ctx, const LatticeMemoryArgs& args);
namespace cuda {  // lattice_memory_cuda.cu compiled by nvcc
absl::Status LatticeMemoryCuda(const Context& ctx, const LatticeMemoryArgs& args);
}  // namespace cuda
namespace cuda_emu {  // the same source on the CUDA emulator
absl::Status LatticeMemoryCuda(const Context& ctx, const LatticeMemoryArgs& args);
}  // namespace cuda_emu
}  // namespace internal

}  // namespace mcserve::kernels

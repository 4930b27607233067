// HopeConfig: the `hope` family's fields (docs/model-format.md, `hope`): self-modifying Titans and the
// Continuum Memory System. One field per open choice of the paper (A1–A25), defaulting to the
// recommended resolution; the dims (num_heads, head_dim) live in ModelConfig. Immutable after load.
#pragma once

#include <cstdint>
#include <vector>

namespace mcserve::engine {

// One level of the Continuum Memory System, applied in config order (level 0 first):
// z ← z + down(act(RMSNorm(z)·norm)) with act SwiGLU (gate, up) or GELU (up).
struct CmsLevel {
  int64_t chunk_size = 1;         // C: update period in tokens (adaptive levels only)
  int64_t intermediate_size = 1;  // d_ff
  bool swiglu = true;             // activation: swiglu | gelu (exact erf)
  double lr = 0.0;                // η of the adaptive update (0: frozen)
};

enum class HopeMomentumKind { kNone, kConstant, kData };

struct HopeConfig {
  int64_t memory_expansion = 2;    // E = memory_expansion · head_dim
  int64_t chunk_size_other = 16;   // C_o: anchor period of k, v, eta, alpha (, q)
  int64_t chunk_size_mem = 16;     // C_mem: anchor period of mem
  bool memory_input_proj = false;  // memory_input: proj (in_proj u) instead of head slices of u
  bool scalar_memory_skip = false; // scalar_memory_skip: linear (R of eta, alpha = ⟨skip, x⟩)
  bool eta_softplus = false;       // eta_activation: softplus (·eta_scale) instead of sigmoid (·eta_max)
  double eta_max = 1.0, eta_scale = 1.0;
  bool eta_clamp = true;           // η ≤ 1 + α
  bool adaptive_q = false;         // M_q replaces q_proj
  bool w1_dgd_hidden = false;      // w1_rule: dgd_hidden
  bool read_after_write = false;   // read_index: after_write
  bool readout_anchor = false;     // readout_mode: A
  HopeMomentumKind momentum = HopeMomentumKind::kNone;
  double momentum_beta = 0.9;
  double grad_scale = 2.0;
  bool output_gate = true;         // output_gate: rmsnorm_silu_gate (else rmsnorm)
  bool cms_adaptive = false;       // test-time training of the CMS levels with lr > 0
  bool memory_gelu = false;        // memory_activation: gelu (else silu)
  std::vector<CmsLevel> cms_levels;

  // Whether level `level` trains at test time (cms_adaptive and lr > 0). Any thread.
  bool Adapts(const CmsLevel& level) const { return cms_adaptive && level.lr > 0; }
  // Whether any level trains at test time. Any thread.
  bool AdaptiveCms() const {
    for (const CmsLevel& level : cms_levels) {
      if (Adapts(level)) return true;
    }
    return false;
  }
};

}  // namespace mcserve::engine

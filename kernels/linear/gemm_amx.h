// The BF16-weight GEMM on AMX (decode batches, kGemmAmxMinRows ≤ m ≤ kGemmSmallMaxRows):
// out[m, n] (+)= x[m, k] · w[n, k]ᵀ with the weights read in place, 16 rows × 32 columns at a time, as
// AMX A tiles, and x as B tiles. x is split once per call into three BF16 parts (x = x₁ + x₂ + x₃ to
// F32's 24 bits) laid out as AMX wants them (PackForGemmAmx); TDPBF16PS multiplies each part with the
// exact BF16 weights and accumulates in F32, so the sums keep F32 accuracy (only their order differs
// from the AVX-512 kernel's). Chosen at run time: the CPU has AMX-TILE and AMX-BF16, Linux grants the
// process its tile data (arch_prctl), the AVX-512 kernels are allowed (cpu::UseAvx512), and
// MCSERVE_CPU_ISA is not "avx512" (which keeps AVX-512 without AMX). Any thread.
#pragma once

#include <cstdint>

#include "kernels/linear/gemm_operands.h"

namespace mcserve::kernels::internal {

// The smallest m the AMX GEMM takes: every batch the GEMV does not (m > 8; part of a tile of batch rows
// zero-padded). bench/ab_decode.py, BF16 decode step, Intel Xeon: against the AVX-512 GEMM 1.67x /
// 1.69x at m = 9 / 12; against the GEMV at m = 8 1.04x, 0.96x, 1.04x and 0.98x in four runs (no
// result), at m = 5 / 6 / 7 0.75x / 0.84x / 0.96x (bench/README.md).
inline constexpr int64_t kGemmAmxMinRows = 9;
// Weight rows per block (two 16-row tiles): output columns should be split among threads in these.
inline constexpr int64_t kGemmAmxBlockRows = 32;

// Whether BF16 GEMMs with kGemmAmxMinRows ≤ m ≤ kGemmSmallMaxRows run on AMX (see above; read once,
// but for the test override).
bool UseAmxBf16Gemm();
// Tests: true keeps AMX off (the AVX-512 GEMM runs), false restores the run-time choice. Not while a
// GEMM runs.
void ForceNoAmxForTesting(bool force);

// Elements (uint16_t) of PackForGemmAmx's output for x [m, k].
int64_t GemmAmxPackedSize(int64_t m, int64_t k);

// xp = x [m, k] as three BF16 parts in AMX B-tile layout: xp[part][m / 16][k / 2][16][2], element
// (p, b, c2, j, t) = part p of x[16b + j, 2·c2 + t]; m and k padded with zeros to multiples of 16 and 32.
void PackForGemmAmx(const float* x, int64_t m, int64_t k, uint16_t* xp);
// How many independent pieces (16 batch rows × 32 columns, every part) PackForGemmAmx's work splits
// into, and the same packing of pieces [begin, end) only: threads may pack disjoint ranges into one xp.
int64_t GemmAmxPackPieces(int64_t m, int64_t k);
void PackForGemmAmx(const float* x, int64_t m, int64_t k, uint16_t* xp, int64_t begin, int64_t end);

// One GEMM call's operands: x is PackForGemmAmx's xp (of x [m, k]).
using GemmAmxArgs = GemmOperands<uint16_t>;

// Output columns [j0, j1) with BF16 weights w [n, k] (bits); j0 a multiple of kGemmAmxBlockRows.
// Weight blocks that end past n or k are copied zero-padded into cpu::ThreadScratch (so not inside
// another user of it). Call only where UseAmxBf16Gemm().
void GemmBf16Amx(const GemmAmxArgs& a, const uint16_t* w, int64_t j0, int64_t j1);

}  // namespace mcserve::kernels::internal

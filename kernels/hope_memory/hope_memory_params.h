// HopeMemory, HopeFeatures, HopeMemWrite: the raw pointers and sizes of one call from its validated args
// (shared by the CPU and CUDA entry points). Any thread.
#pragma once

#include "kernels/core/tensor_data.h"
#include "kernels/hope_memory/hope_features.h"
#include "kernels/hope_memory/hope_mem_write.h"
#include "kernels/hope_memory/hope_memory.h"
#include "kernels/hope_memory/hope_memory_scan.h"

namespace mcserve::kernels::hope_memory_math {

// Data pointer of an optional tensor (null when absent).
template <class T>
T* OptData(const Tensor* t) {
  return t != nullptr ? Data<T>(*t) : nullptr;
}
template <class T>
T* OptData(Tensor* t) {
  return t != nullptr ? Data<T>(*t) : nullptr;
}

// The fields every call of the scan sets alike: options, sizes, the layout and the phases.
inline HopeScanParams CommonParams(const HopeMemoryOptions& o, const Tensor& rows, const BatchLayout& layout,
                                   const Tensor& phase) {
  HopeScanParams p{};
  p.opt = o;
  p.d = o.head_dim;
  p.e = o.expansion * o.head_dim;
  p.conv = o.conv_size;
  p.t = rows.dim(0);
  p.heads = rows.dim(1);
  p.cu = Data<int32_t>(*layout.cu_seqlens);
  p.slots = Data<int32_t>(*layout.slot_ids);
  p.phase = Data<int32_t>(phase);
  return p;
}

// args (validated by HopeMemory) → the scan's parameters.
inline HopeScanParams MakeScanParams(const HopeMemoryArgs& a) {
  HopeScanParams p = CommonParams(a.options, *a.x, a.layout, *a.phase);
  p.num_slots = a.memory->dim(0);
  p.pm = a.memory->dim(2);
  p.pf = a.fast->dim(2);
  p.x = Data<float>(*a.x);
  p.q_pre = OptData<const float>(a.q_pre);
  p.beta = OptData<const float>(a.beta);
  p.skip = OptData<const float>(a.skip);
  p.q_conv = Data<float>(*a.q_conv);
  p.k_conv = Data<float>(*a.k_conv);
  p.v_conv = Data<float>(*a.v_conv);
  p.memory = Data<float>(*a.memory);
  p.mem_anchor = Data<float>(*a.mem_anchor);
  p.momentum = OptData<float>(a.momentum);
  p.fast = Data<float>(*a.fast);
  p.fast_anchor = Data<float>(*a.fast_anchor);
  p.fast_momentum = OptData<float>(a.fast_momentum);
  p.conv_q = OptData<float>(a.conv_q);
  p.conv_k = OptData<float>(a.conv_k);
  p.conv_v = OptData<float>(a.conv_v);
  p.out = Data<float>(*a.out);
  return p;
}

// HopeFeatures' args → the scan's parameters (memory null: the producers alone).
inline HopeScanParams MakeScanParams(const HopeFeaturesArgs& a) {
  HopeScanParams p = CommonParams(a.options, *a.x, a.layout, *a.phase);
  p.num_slots = a.fast->dim(0);
  p.pm = HopeMemParams(a.options);
  p.pf = a.fast->dim(2);
  p.x = Data<float>(*a.x);
  p.q_pre = OptData<const float>(a.q_pre);
  p.beta = OptData<const float>(a.beta);
  p.skip = OptData<const float>(a.skip);
  p.q_conv = Data<float>(*a.q_conv);
  p.k_conv = Data<float>(*a.k_conv);
  p.v_conv = Data<float>(*a.v_conv);
  p.fast = Data<float>(*a.fast);
  p.fast_anchor = Data<float>(*a.fast_anchor);
  p.fast_momentum = OptData<float>(a.fast_momentum);
  p.conv_q = OptData<float>(a.conv_q);
  p.conv_k = OptData<float>(a.conv_k);
  p.conv_v = OptData<float>(a.conv_v);
  p.q_out = Data<float>(*a.q);
  p.k_out = Data<float>(*a.k);
  p.v_out = Data<float>(*a.v);
  p.alpha_out = Data<float>(*a.alpha);
  p.eta_out = Data<float>(*a.eta);
  return p;
}

// HopeMemWrite's args → the scan's parameters (fast null: M_mem alone).
inline HopeScanParams MakeScanParams(const HopeMemWriteArgs& a) {
  HopeScanParams p = CommonParams(a.options, *a.q, a.layout, *a.phase);
  p.num_slots = a.memory->dim(0);
  p.pm = a.memory->dim(2);
  p.pf = HopeFastParams(a.options);
  p.beta = OptData<const float>(a.beta);
  p.memory = Data<float>(*a.memory);
  p.mem_anchor = Data<float>(*a.mem_anchor);
  p.momentum = OptData<float>(a.momentum);
  p.q_in = Data<float>(*a.q);
  p.k_in = Data<float>(*a.k);
  p.v_in = Data<float>(*a.v);
  p.alpha_in = Data<float>(*a.alpha);
  p.eta_in = Data<float>(*a.eta);
  p.read_weights = OptData<float>(a.read_weights);
  p.out = Data<float>(*a.out);
  return p;
}

}  // namespace mcserve::kernels::hope_memory_math

// Raw element access for kernels/ only. engine/ and server/ must not include this header
// (a test enforces it): they see tensor data only through explicit host copies.
#pragma once

#include <vector>

#include "kernels/core/tensor.h"

namespace mcserve::kernels {

// Pointer to the first element of `t` (on t.device()).
void* RawData(const Tensor& t);

template <typename T>
T* Data(Tensor& t) {
  return static_cast<T*>(RawData(t));
}
template <typename T>
const T* Data(const Tensor& t) {
  return static_cast<const T*>(RawData(t));
}

// The elements of host tensor `t` as floats: its own data when it is F32, else widened into
// `scratch` (resized; a caller's thread_local buffer keeps steady-state calls allocation-free).
inline const float* F32View(const Tensor& t, std::vector<float>& scratch) {
  if (t.dtype() == DType::kF32) return Data<float>(t);
  auto widened = t.ToHostF32();
  if (!widened.ok()) return nullptr;
  scratch = *std::move(widened);
  return scratch.data();
}

}  // namespace mcserve::kernels

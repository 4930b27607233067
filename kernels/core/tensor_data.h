// Raw element access for kernels/ only. engine/ and server/ must not include this header
// (a test enforces it): they see tensor data only through explicit host copies.
#pragma once

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

}  // namespace mcserve::kernels

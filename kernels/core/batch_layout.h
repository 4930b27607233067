// How a batch of token rows splits into sequences, each bound to a state slot.
// Ops that carry recurrent state (short conv, linear memories) take one of these: sequence b owns
// rows [cu_seqlens[b], cu_seqlens[b+1]) and reads/writes state slot slot_ids[b]. A decode step is
// the case where every sequence has one row; a prefill chunk is one sequence with many.
#pragma once

#include "kernels/core/tensor.h"

namespace mcserve::kernels {

struct BatchLayout {
  const Tensor* cu_seqlens = nullptr;  // [B + 1] I32, non-decreasing, cu[0] = 0, cu[B] = T rows
  const Tensor* slot_ids = nullptr;    // [B] I32, distinct, each in [0, num_slots)
};

// Validates a layout against T rows and a state pool of num_slots; InvalidArgument on violation.
// Both tensors must be on one device. Values are checked only for host (CPU) tensors: reading a
// device layout back would cost a synchronising copy per op, so device code checks those itself.
absl::Status ValidateBatchLayout(const BatchLayout& layout, int64_t rows, int64_t num_slots);
// The same for an op running on `device` (its ctx.device): both layout tensors must live there,
// and every error message starts with "<op>: ".
absl::Status ValidateBatchLayout(const char* op, const BatchLayout& layout, int64_t rows, int64_t num_slots,
                                 Device device);

}  // namespace mcserve::kernels

// ValidateCsr: host-side check of a per-token page list in CSR form (McReadout, McRoute): token t
// reads token_pages[offsets[t] .. offsets[t+1]). Reads the values through host copies, so the
// tensors may be on any device. Any thread.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/core/tensor.h"

namespace mcserve::kernels {

// OK when offsets [t + 1] I32 start at 0, never decrease and end at P, and every entry of
// token_pages [P] I32 is in [0, num_pages); else InvalidArgument "<op_name>: ..." naming the entry.
absl::Status ValidateCsr(const char* op_name, const Tensor& offsets, const Tensor& token_pages, int64_t t,
                         int64_t num_pages);

}  // namespace mcserve::kernels

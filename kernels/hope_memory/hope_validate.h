// Validation shared by HopeMemory, HopeFeatures and HopeMemWrite: errors are InvalidArgument "<op>: ...".
// Any thread.
#pragma once

#include <cstdint>
#include <string>
#include <initializer_list>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "kernels/core/tensor.h"
#include "kernels/hope_memory/hope_memory.h"

namespace mcserve::kernels::hope_validate {

using Named = std::pair<const char*, const Tensor*>;

// InvalidArgument "<op>: msg".
absl::Status Bad(const char* op, const std::string& msg);
// The options' ranges (head_dim, expansion, conv, chunk sizes, enums, scales).
absl::Status Options(const char* op, const HopeMemoryOptions& o);
// An optional F32 tensor: present iff `used` (`why` says by which option), then exactly `shape`.
absl::Status Optional(const char* op, const char* name, const Tensor* t, bool used, const Shape& shape,
                      const char* want, const char* why);
// phase [B] I32; its values ≥ 0 when on the host (device values: checked by the kernel).
absl::Status Phase(const char* op, const Tensor& phase, int64_t num_seqs);
// Every non-null `written` tensor writable and overlapping no other tensor of `written` or `read`.
absl::Status Disjoint(const char* op, std::initializer_list<Named> written, std::initializer_list<Named> read);

}  // namespace mcserve::kernels::hope_validate

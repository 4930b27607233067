#include "kernels/core/csr.h"

#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"

namespace mcserve::kernels {

namespace {

// The values of an I32 tensor on the host: read in place on the CPU (a decode step copies nothing),
// else copied into `copy`.
absl::StatusOr<std::span<const int32_t>> HostI32(const Tensor& t, std::vector<int32_t>& copy) {
  if (t.device() == Device::kCpu) return I32Span(t);
  MCSERVE_ASSIGN_OR_RETURN(copy, t.ToHostI32());
  return std::span<const int32_t>(copy);
}

}  // namespace

absl::Status ValidateCsr(const char* op_name, const Tensor& offsets, const Tensor& token_pages, int64_t t,
                         int64_t num_pages) {
  auto bad = [&](const std::string& msg) { return absl::InvalidArgumentError(absl::StrCat(op_name, ": ", msg)); };
  // The callers check dtypes and shapes with their own messages first; repeated here so that the
  // element reads below can never go out of range.
  if (offsets.dtype() != DType::kI32 || offsets.shape() != Shape{t + 1} || token_pages.dtype() != DType::kI32 ||
      token_pages.rank() != 1) {
    return bad(absl::StrCat("token_page_offsets ", offsets.DebugString(), ", token_pages ", token_pages.DebugString(),
                            " (want I32 [T + 1 = ", t + 1, "] and I32 [P])"));
  }
  std::vector<int32_t> off_copy, idx_copy;
  MCSERVE_ASSIGN_OR_RETURN(const std::span<const int32_t> off, HostI32(offsets, off_copy));
  MCSERVE_ASSIGN_OR_RETURN(const std::span<const int32_t> idx, HostI32(token_pages, idx_copy));
  const int64_t p = static_cast<int64_t>(idx.size());
  if (off[0] != 0) return bad(absl::StrCat("token_page_offsets[0] = ", off[0], " (want 0)"));
  for (int64_t i = 0; i < t; ++i) {
    if (off[i + 1] < off[i]) {
      return bad(absl::StrCat("token_page_offsets decrease at token ", i, ": ", off[i], " > ", off[i + 1]));
    }
  }
  if (off[t] != p) return bad(absl::StrCat("token_page_offsets[T = ", t, "] = ", off[t], " (want P = ", p, ")"));
  for (int64_t e = 0; e < p; ++e) {
    if (idx[e] < 0 || idx[e] >= num_pages) {
      return bad(absl::StrCat("token_pages[", e, "] = ", idx[e], " is out of range for ", num_pages, " pages"));
    }
  }
  return absl::OkStatus();
}

}  // namespace mcserve::kernels

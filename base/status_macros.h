// Status propagation macros used across mcserve (kernels/ is the lowest layer, so they live here).
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define MCSERVE_STATUS_CONCAT_INNER(a, b) a##b
#define MCSERVE_STATUS_CONCAT(a, b) MCSERVE_STATUS_CONCAT_INNER(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define MCSERVE_RETURN_IF_ERROR(expr)                 \
  do {                                                \
    ::absl::Status mcserve_status_ = (expr);          \
    if (!mcserve_status_.ok()) return mcserve_status_; \
  } while (0)

// `lhs = value of expr` (an absl::StatusOr<T>), or returns its error.
#define MCSERVE_ASSIGN_OR_RETURN(lhs, expr) \
  MCSERVE_ASSIGN_OR_RETURN_IMPL(MCSERVE_STATUS_CONCAT(mcserve_statusor_, __LINE__), lhs, expr)
#define MCSERVE_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return std::move(tmp).status();      \
  lhs = std::move(tmp).value()

// Aborts on a broken internal invariant. Never use for anything a request or a file can cause.
#define MCSERVE_CHECK(cond)                                                              \
  do {                                                                                   \
    if (!(cond)) ::mcserve::internal::CheckFailed(#cond, __FILE__, __LINE__);            \
  } while (0)

namespace mcserve::internal {
[[noreturn]] void CheckFailed(const char* cond, const char* file, int line);
}  // namespace mcserve::internal

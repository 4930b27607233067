#include "base/status_macros.h"

#include <cstdio>
#include <cstdlib>

namespace mcserve::internal {

void CheckFailed(const char* cond, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: internal invariant broken: %s\n", file, line, cond);
  std::abort();
}

}  // namespace mcserve::internal

#include "tools/eval/engine_request.h"

#include <utility>

#include "base/status_macros.h"

namespace mcserve::tools {

absl::StatusOr<Completion> Complete(engine::Engine& engine, engine::RequestSpec spec) {
  MCSERVE_ASSIGN_OR_RETURN(std::shared_ptr<engine::RequestHandle> handle, engine.Submit(std::move(spec)));
  Completion c;
  bool first = true;
  for (;;) {
    MCSERVE_ASSIGN_OR_RETURN(engine::OutputEvent e, handle->Next(absl::InfiniteDuration()));
    if (first) {
      c.cached_prompt_tokens = e.cached_prompt_tokens;
      c.prompt_logprobs = std::move(e.prompt_logprobs);
      first = false;
    }
    if (e.token_id >= 0) c.tokens.push_back(e.token_id);
    if (!e.is_final()) continue;
    MCSERVE_RETURN_IF_ERROR(e.error);
    c.finish = e.finish;
    return c;
  }
}

}  // namespace mcserve::tools

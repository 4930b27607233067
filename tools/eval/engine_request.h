// One request through the engine, waited for to its end: what the evaluations need of a completion.
// Caller's thread (blocks until the request finishes).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/serving/engine.h"

namespace mcserve::tools {

// Everything a finished request delivered.
struct Completion {
  std::vector<int32_t> tokens;         // generated ids, a stop token (EOS) included
  std::vector<float> prompt_logprobs;  // RequestSpec::prompt_logprobs: log p(prompt[i] | prompt[<i]), i ≥ 1
  int64_t cached_prompt_tokens = 0;
  engine::FinishReason finish = engine::FinishReason::kNone;
};

// Submits `spec` and reads its events to the final one; the request's error if it failed (or was
// cancelled with one), else the Submit error.
absl::StatusOr<Completion> Complete(engine::Engine& engine, engine::RequestSpec spec);

}  // namespace mcserve::tools

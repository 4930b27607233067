// CallerAccounting: what the front ends report about each caller's requests, for the per-caller
// metrics (label `api_key_name`: the key's name, "" without keys). Implemented by the metrics
// (server/metrics/), called by both front ends through this interface only. Any thread.
#pragma once

#include <cstdint>
#include "absl/strings/string_view.h"

#include "engine/sampling/output_stream.h"

namespace mcserve::server {

class CallerAccounting {
 public:
  virtual ~CallerAccounting() = default;
  // A request of `caller` ended (any reason) after `prompt_tokens` and `generated_tokens`.
  virtual void RequestFinished(absl::string_view caller, engine::FinishReason reason, int64_t prompt_tokens,
                               int64_t generated_tokens) = 0;
  // `caller` aborted one of its requests by id (gRPC Abort).
  virtual void RequestAborted(absl::string_view caller) = 0;
  // A call was refused for a missing or wrong API key.
  virtual void Unauthenticated() = 0;
};

}  // namespace mcserve::server

#include "server/metrics/caller_metrics.h"

#include "base/status_macros.h"

namespace mcserve::server {
namespace {

constexpr const char* kReasons[] = {"stop", "length", "cancelled", "error"};

// A child that the label set guarantees (pre-created); a missing one would be a broken invariant
// only if a caller were not a configured name, which the front ends never pass.
void Add(Family<Counter>* family, std::vector<std::string> values, double delta) {
  absl::StatusOr<Counter*> child = family->Get(values);
  if (child.ok()) (*child)->Increment(delta);
}

}  // namespace

const char* FinishedReasonLabel(engine::FinishReason reason) {
  switch (reason) {
    case engine::FinishReason::kStop: return "stop";
    case engine::FinishReason::kLength: return "length";
    case engine::FinishReason::kCancelled: return "cancelled";
    case engine::FinishReason::kError:
    case engine::FinishReason::kNone: break;
  }
  return "error";
}

absl::StatusOr<std::unique_ptr<CallerMetrics>> CallerMetrics::Create(Registry& r, absl::string_view model_name,
                                                                     const std::vector<std::string>& key_names) {
  std::unique_ptr<CallerMetrics> m(new CallerMetrics());
  m->model_ = std::string(model_name);
  const std::vector<std::string> labels = {"model_name", "api_key_name"};
  MCSERVE_ASSIGN_OR_RETURN(m->requests_,
                           r.AddCounter("mcserve:caller_requests_total", "Finished requests per API key and finish reason.",
                                        {"model_name", "api_key_name", "finished_reason"}));
  MCSERVE_ASSIGN_OR_RETURN(m->prompt_tokens_, r.AddCounter("mcserve:caller_prompt_tokens_total",
                                                           "Prompt tokens of finished requests, per API key.", labels));
  MCSERVE_ASSIGN_OR_RETURN(m->generation_tokens_,
                           r.AddCounter("mcserve:caller_generation_tokens_total", "Generated tokens per API key.", labels));
  MCSERVE_ASSIGN_OR_RETURN(m->aborts_, r.AddCounter("mcserve:caller_aborts_total",
                                                    "Requests aborted by their owner (Abort RPC), per API key.", labels));
  MCSERVE_ASSIGN_OR_RETURN(Family<Counter> * unauthenticated,
                           r.AddCounter("mcserve:unauthenticated_requests_total",
                                        "Calls refused for a missing or wrong API key.", {"model_name"}));
  MCSERVE_ASSIGN_OR_RETURN(m->unauthenticated_, unauthenticated->Get(std::vector<std::string>{m->model_}));
  std::vector<std::string> names = key_names;
  if (names.empty()) names.push_back("");
  for (const std::string& name : names) {
    for (const char* reason : kReasons) {
      MCSERVE_RETURN_IF_ERROR(m->requests_->Get(std::vector<std::string>{m->model_, name, reason}).status());
    }
    for (Family<Counter>* f : {m->prompt_tokens_, m->generation_tokens_, m->aborts_}) {
      MCSERVE_RETURN_IF_ERROR(f->Get(std::vector<std::string>{m->model_, name}).status());
    }
  }
  return m;
}

void CallerMetrics::RequestFinished(absl::string_view caller, engine::FinishReason reason, int64_t prompt_tokens,
                                    int64_t generated_tokens) {
  const std::string name(caller);
  Add(requests_, {model_, name, FinishedReasonLabel(reason)}, 1);
  Add(prompt_tokens_, {model_, name}, static_cast<double>(prompt_tokens));
  Add(generation_tokens_, {model_, name}, static_cast<double>(generated_tokens));
}

void CallerMetrics::RequestAborted(absl::string_view caller) { Add(aborts_, {model_, std::string(caller)}, 1); }

void CallerMetrics::Unauthenticated() { unauthenticated_->Increment(); }

}  // namespace mcserve::server

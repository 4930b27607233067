// CallerMetrics: the per-caller metrics (CallerAccounting), labelled by the API key's name
// (`api_key_name`; "" when the server has no keys). Children exist from the first scrape for every
// configured name. Any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/common/caller_accounting.h"
#include "server/metrics/metrics.h"

namespace mcserve::server {

class CallerMetrics final : public CallerAccounting {
 public:
  // Registers mcserve:caller_requests_total{api_key_name, finished_reason},
  // mcserve:caller_prompt_tokens_total, mcserve:caller_generation_tokens_total,
  // mcserve:caller_aborts_total (each {model_name, api_key_name}) and
  // mcserve:unauthenticated_requests_total, with children for `key_names` ("" when empty).
  static absl::StatusOr<std::unique_ptr<CallerMetrics>> Create(Registry& registry, absl::string_view model_name,
                                                               const std::vector<std::string>& key_names);

  void RequestFinished(absl::string_view caller, engine::FinishReason reason, int64_t prompt_tokens,
                       int64_t generated_tokens) override;
  void RequestAborted(absl::string_view caller) override;
  void Unauthenticated() override;

 private:
  CallerMetrics() = default;
  std::string model_;
  Family<Counter>* requests_ = nullptr;
  Family<Counter>* prompt_tokens_ = nullptr;
  Family<Counter>* generation_tokens_ = nullptr;
  Family<Counter>* aborts_ = nullptr;
  Counter* unauthenticated_ = nullptr;
};

// "stop" / "length" / "cancelled" / "error": the finished_reason label of `reason`.
const char* FinishedReasonLabel(engine::FinishReason reason);

}  // namespace mcserve::server

#include "server/metrics/mcserve_metrics.h"

#include <string>

#include "base/status_macros.h"

namespace mcserve::server {
namespace {

constexpr char kModel[] = "model_name";

// Registers a family labelled {model_name, extra...} and returns its child for {model, values...}.
template <typename T>
absl::StatusOr<T*> Child(absl::StatusOr<Family<T>*> family, std::string_view model,
                         std::vector<std::string> extra_values = {}) {
  if (!family.ok()) return family.status();
  std::vector<std::string> values = {std::string(model)};
  values.insert(values.end(), extra_values.begin(), extra_values.end());
  return (*family)->Get(values);
}

}  // namespace

const std::vector<double>& TimeToFirstTokenBuckets() {
  static const std::vector<double> kBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                                               0.25,  0.5,   0.75, 1.0,  2.5,  5.0,  7.5,  10.0,
                                               20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
  return kBuckets;
}

const std::vector<double>& InterTokenLatencyBuckets() {
  static const std::vector<double> kBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                               0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
  return kBuckets;
}

const std::vector<double>& E2eRequestLatencyBuckets() {
  static const std::vector<double> kBuckets = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,  15.0, 20.0,
                                               30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
  return kBuckets;
}

absl::StatusOr<std::unique_ptr<McserveMetrics>> McserveMetrics::Create(Registry& r, std::string_view model) {
  const std::vector<std::string> m = {kModel};
  MCSERVE_ASSIGN_OR_RETURN(Gauge * running,
                           Child(r.AddGauge("mcserve:num_requests_running",
                                            "Number of requests running (holding a state slot).", m),
                                 model));
  MCSERVE_ASSIGN_OR_RETURN(
      Gauge * waiting,
      Child(r.AddGauge("mcserve:num_requests_waiting", "Number of requests queued, waiting for a state slot.", m),
            model));
  MCSERVE_ASSIGN_OR_RETURN(
      Gauge * slot_usage,
      Child(r.AddGauge("mcserve:state_slot_usage_perc", "Fraction of recurrent state slots in use (0 to 1).", m),
            model));
  MCSERVE_ASSIGN_OR_RETURN(Family<Gauge> * pages,
                           r.AddGauge("mcserve:checkpoint_pages", "Checkpoint pages held, per memory tier.",
                                      {kModel, "tier"}));
  MCSERVE_ASSIGN_OR_RETURN(Gauge * pages_device, pages->Get({model, "device"}));
  MCSERVE_ASSIGN_OR_RETURN(Gauge * pages_host, pages->Get({model, "host"}));
  MCSERVE_ASSIGN_OR_RETURN(
      Gauge * max_running,
      Child(r.AddGauge("mcserve:max_running_requests",
                       "Effective concurrency cap: the most requests that run at once (state slots).", m),
            model));

  MCSERVE_ASSIGN_OR_RETURN(
      Counter * prompt,
      Child(r.AddCounter("mcserve:prompt_tokens_total",
                         "Prompt tokens of admitted requests (run through the model or resumed from the prefix cache).",
                         m),
            model));
  MCSERVE_ASSIGN_OR_RETURN(
      Counter * generation,
      Child(r.AddCounter("mcserve:generation_tokens_total", "Generated tokens.", m), model));
  MCSERVE_ASSIGN_OR_RETURN(Family<Counter> * success,
                           r.AddCounter("mcserve:request_success_total", "Finished requests, per finish reason.",
                                        {kModel, "finished_reason"}));
  MCSERVE_ASSIGN_OR_RETURN(Counter * stop, success->Get({model, "stop"}));
  MCSERVE_ASSIGN_OR_RETURN(Counter * length, success->Get({model, "length"}));
  MCSERVE_ASSIGN_OR_RETURN(Counter * cancelled, success->Get({model, "cancelled"}));
  MCSERVE_ASSIGN_OR_RETURN(Counter * error, success->Get({model, "error"}));
  MCSERVE_ASSIGN_OR_RETURN(
      Counter * stagings,
      Child(r.AddCounter("mcserve:checkpoint_stagings_total", "Checkpoint pages copied from host to device.", m),
            model));
  MCSERVE_ASSIGN_OR_RETURN(
      Counter * hits,
      Child(r.AddCounter("mcserve:prefix_cache_hits_total", "Requests that resumed from a cached prefix.", m),
            model));
  MCSERVE_ASSIGN_OR_RETURN(
      Counter * misses,
      Child(r.AddCounter("mcserve:prefix_cache_misses_total", "Requests that found no cached prefix.", m),
            model));
  MCSERVE_ASSIGN_OR_RETURN(
      Counter * evictions,
      Child(r.AddCounter("mcserve:prefix_cache_evictions_total",
                         "Unreferenced checkpoint pages dropped to make room.", m),
            model));
  MCSERVE_ASSIGN_OR_RETURN(
      Gauge * prefix_entries,
      Child(r.AddGauge("mcserve:prefix_cache_entries", "Cached prompt-prefix blocks (state snapshots) held.", m),
            model));
  MCSERVE_ASSIGN_OR_RETURN(
      Gauge * prefix_bytes,
      Child(r.AddGauge("mcserve:prefix_cache_bytes", "Host bytes of the prefix cache's state snapshots.", m),
            model));
  MCSERVE_ASSIGN_OR_RETURN(
      Gauge * prefix_budget,
      Child(r.AddGauge("mcserve:prefix_cache_budget_bytes",
                       "The prefix cache's byte budget (--prefix-cache-mib); -1 = unlimited, 0 = caching off.", m),
            model));
  MCSERVE_ASSIGN_OR_RETURN(
      Counter * write_timeouts,
      Child(r.AddCounter("mcserve:request_write_timeouts_total",
                         "Requests cancelled because their client read no output for --write-timeout-seconds.", m),
            model));

  MCSERVE_ASSIGN_OR_RETURN(
      Histogram * ttft,
      Child(r.AddHistogram("mcserve:time_to_first_token_seconds",
                           "Time from request arrival to its first generated token, in seconds.", m,
                           TimeToFirstTokenBuckets()),
            model));
  MCSERVE_ASSIGN_OR_RETURN(
      Histogram * itl,
      Child(r.AddHistogram("mcserve:inter_token_latency_seconds",
                           "Time between consecutive generated tokens of a request, in seconds.", m,
                           InterTokenLatencyBuckets()),
            model));
  MCSERVE_ASSIGN_OR_RETURN(
      Histogram * e2e,
      Child(r.AddHistogram("mcserve:e2e_request_latency_seconds",
                           "Time from request arrival to its end, in seconds.", m, E2eRequestLatencyBuckets()),
            model));

  return std::unique_ptr<McserveMetrics>(new McserveMetrics{
      *running, *waiting, *slot_usage, *pages_device, *pages_host, *max_running, *prefix_entries, *prefix_bytes,
      *prefix_budget, *prompt, *generation, *stop, *length, *cancelled, *error, *stagings, *hits, *misses,
      *evictions, *write_timeouts, *ttft, *itl, *e2e});
}

Counter& McserveMetrics::request_success(engine::FinishReason reason) {
  switch (reason) {
    case engine::FinishReason::kStop: return request_success_stop;
    case engine::FinishReason::kLength: return request_success_length;
    case engine::FinishReason::kCancelled: return request_success_cancelled;
    case engine::FinishReason::kError:
    case engine::FinishReason::kNone: break;
  }
  return request_success_error;
}

void McserveMetrics::UpdateFromEngineStats(const engine::EngineStats& s) {
  using engine::FinishReason;
  num_requests_running.Set(static_cast<double>(s.running));
  num_requests_waiting.Set(static_cast<double>(s.waiting));
  state_slot_usage_perc.Set(s.slots_total > 0 ? static_cast<double>(s.slots_used) / s.slots_total : 0.0);
  checkpoint_pages_device.Set(static_cast<double>(s.runner.device_pages));
  checkpoint_pages_host.Set(static_cast<double>(s.runner.host_pages));
  max_running_requests.Set(static_cast<double>(s.slots_total));
  prefix_cache_entries.Set(static_cast<double>(s.runner.prefix_cache_entries));
  prefix_cache_bytes.Set(static_cast<double>(s.runner.prefix_cache_bytes));
  prefix_cache_budget_bytes.Set(static_cast<double>(s.runner.prefix_cache_budget_bytes));

  AdvanceTo(prompt_tokens, static_cast<double>(s.prompt_tokens_processed + s.prompt_tokens_cached));
  AdvanceTo(generation_tokens, static_cast<double>(s.tokens_generated));
  AdvanceTo(request_success_stop, static_cast<double>(s.finished_by(FinishReason::kStop)));
  AdvanceTo(request_success_length, static_cast<double>(s.finished_by(FinishReason::kLength)));
  AdvanceTo(request_success_cancelled, static_cast<double>(s.finished_by(FinishReason::kCancelled)));
  AdvanceTo(request_success_error, 
      static_cast<double>(s.finished_by(FinishReason::kError) + s.finished_by(FinishReason::kNone)));
  AdvanceTo(checkpoint_stagings, static_cast<double>(s.runner.stagings));
  AdvanceTo(prefix_cache_hits, static_cast<double>(s.runner.prefix_hits));
  AdvanceTo(prefix_cache_misses, static_cast<double>(s.runner.prefix_misses));
  AdvanceTo(prefix_cache_evictions, static_cast<double>(s.runner.evictions));
  AdvanceTo(request_write_timeouts, static_cast<double>(s.write_timeouts));
}

}  // namespace mcserve::server

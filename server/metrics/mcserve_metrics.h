// The mcserve metric set, named like vLLM's so its dashboards and autoscalers fit,
// registered in one place. Every family carries the label model_name (one value).
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/sampling/output_stream.h"
#include "engine/serving/engine.h"
#include "engine/serving/latency_observer.h"
#include "server/metrics/metrics.h"

namespace mcserve::server {

// vLLM's bucket sets (serving-anchors.md §3.1), in seconds.
const std::vector<double>& TimeToFirstTokenBuckets();
const std::vector<double>& InterTokenLatencyBuckets();
const std::vector<double>& E2eRequestLatencyBuckets();

// References to the children (model_name = the served model) of every mcserve family. The
// references stay valid as long as the Registry. Every member may be used from any thread.
struct McserveMetrics {
  // Registers every family in `registry` with model_name = `model_name` and creates its children
  // (so all series exist from the first scrape). AlreadyExists if registered twice in one Registry.
  static absl::StatusOr<std::unique_ptr<McserveMetrics>> Create(Registry& registry, std::string_view model_name);

  // Sets the gauges and advances the counters to the engine's cumulative totals (counters never go
  // down: each takes the max of its value and the engine's). Any thread, e.g. a Registry render hook.
  void UpdateFromEngineStats(const engine::EngineStats& stats);
  // The request_success_total child for `reason` (kNone counts as error).
  Counter& request_success(engine::FinishReason reason);

  // Gauges (set by UpdateFromEngineStats).
  Gauge& num_requests_running;    // mcserve:num_requests_running
  Gauge& num_requests_waiting;    // mcserve:num_requests_waiting
  Gauge& state_slot_usage_perc;   // mcserve:state_slot_usage_perc, fraction 0–1 of state slots used
  Gauge& checkpoint_pages_device; // mcserve:checkpoint_pages{tier="device"}
  Gauge& checkpoint_pages_host;   // mcserve:checkpoint_pages{tier="host"}
  Gauge& max_running_requests;    // mcserve:max_running_requests, the effective concurrency cap
  Gauge& prefix_cache_entries;    // mcserve:prefix_cache_entries, cached prefix blocks
  Gauge& prefix_cache_bytes;      // mcserve:prefix_cache_bytes, host bytes of their state snapshots
  Gauge& prefix_cache_budget_bytes;  // mcserve:prefix_cache_budget_bytes (--prefix-cache-mib; -1 = none)
  // Counters (advanced by UpdateFromEngineStats).
  Counter& prompt_tokens;          // mcserve:prompt_tokens_total (processed + resumed from cache)
  Counter& generation_tokens;      // mcserve:generation_tokens_total
  Counter& request_success_stop;   // mcserve:request_success_total{finished_reason="stop"}
  Counter& request_success_length; // ...{finished_reason="length"}
  Counter& request_success_cancelled;  // ...{finished_reason="cancelled"}
  Counter& request_success_error;  // ...{finished_reason="error"}
  Counter& checkpoint_stagings;    // mcserve:checkpoint_stagings_total (host → device page copies)
  Counter& prefix_cache_hits;      // mcserve:prefix_cache_hits_total
  Counter& prefix_cache_misses;    // mcserve:prefix_cache_misses_total
  Counter& prefix_cache_evictions; // mcserve:prefix_cache_evictions_total
  Counter& request_write_timeouts; // mcserve:request_write_timeouts_total (client stopped reading)
  // Histograms (observed through MetricsLatencyObserver, in seconds).
  Histogram& time_to_first_token;  // mcserve:time_to_first_token_seconds
  Histogram& inter_token_latency;  // mcserve:inter_token_latency_seconds
  Histogram& e2e_request_latency;  // mcserve:e2e_request_latency_seconds
};

// The engine's LatencyObserver (EngineOptions::latency_observer) filling McserveMetrics' latency
// histograms. Called on the engine loop thread; `metrics` must outlive it.
class MetricsLatencyObserver final : public engine::LatencyObserver {
 public:
  explicit MetricsLatencyObserver(McserveMetrics& metrics) : metrics_(metrics) {}
  void OnFirstToken(double seconds) override { metrics_.time_to_first_token.Observe(seconds); }
  void OnInterToken(double seconds) override { metrics_.inter_token_latency.Observe(seconds); }
  void OnFinished(double seconds, engine::FinishReason) override { metrics_.e2e_request_latency.Observe(seconds); }

 private:
  McserveMetrics& metrics_;
};

}  // namespace mcserve::server

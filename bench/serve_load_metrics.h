// serve_load's measurements: one record per request (client-side, steady_clock) and the summary in
// `vllm bench serve`'s terms (TTFT, TPOT, ITL, E2EL; request, output and total token throughput).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace mcserve::bench {

// What one request measured. Times in seconds from sending the request.
struct RequestRecord {
  bool ok = false;
  std::string error;           // "CODE: message" when !ok
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;   // tokens received
  double ttft = 0;             // first message carrying a token
  double e2el = 0;             // the stream's end
  // One per token after the first: a message carrying k tokens after a gap g adds k samples of g / k
  // (tokens in the same message as the first add 0), so they sum to the last token's time − TTFT.
  std::vector<double> itls;
};

// Statistics of one latency, in milliseconds (0 when there are no samples).
struct LatencyStats {
  double mean = 0, median = 0, std = 0, p99 = 0;
};

// Mean, median, population standard deviation and the 99th percentile (linear interpolation between
// order statistics, as numpy's default) of `seconds`, in milliseconds.
LatencyStats StatsMs(std::vector<double> seconds);

// The run as `vllm bench serve` reports it.
struct Summary {
  int64_t completed = 0, failed = 0;
  double duration = 0;         // seconds from the first request sent to the last one finished
  int64_t total_input_tokens = 0, total_output_tokens = 0;  // of the completed requests
  double request_throughput = 0, output_throughput = 0, total_token_throughput = 0;
  LatencyStats ttft, tpot, itl, e2el;
  std::vector<std::string> errors;  // the distinct error messages, in order of appearance
};

// Summarizes the records of a run that took `duration` seconds.
Summary Summarize(const std::vector<RequestRecord>& records, double duration);

// The run's settings, reported with the results.
struct RunSettings {
  std::string address, model;
  int64_t num_prompts = 0, input_len = 0, output_len = 0;
  int max_concurrency = 0;    // 0 = unlimited
  double request_rate = 0;    // requests/s; infinity = all at once
  uint64_t seed = 0;
};

// vLLM's result block ("============ Serving Benchmark Result ============" ...).
std::string FormatSummary(const RunSettings& settings, const Summary& summary);
// vLLM's --save-result keys (duration, completed, ..., mean_ttft_ms, median_ttft_ms, std_ttft_ms,
// p99_ttft_ms, ...) plus the settings.
nlohmann::json SummaryJson(const RunSettings& settings, const Summary& summary);

}  // namespace mcserve::bench

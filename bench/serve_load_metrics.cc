#include "bench/serve_load_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace mcserve::bench {
namespace {

// numpy.percentile(values, p) with linear interpolation; `sorted` ascending and not empty.
double Percentile(const std::vector<double>& sorted, double p) {
  const double position = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(position));
  const size_t above = std::min(below + 1, sorted.size() - 1);
  return sorted[below] + (sorted[above] - sorted[below]) * (position - static_cast<double>(below));
}

// One "{:<40} {:<10}" line of vLLM's block.
std::string Row(const std::string& label, const std::string& value) {
  return absl::StrFormat("%-40s %-10s\n", label, value);
}

std::string Fixed2(double value) { return absl::StrFormat("%.2f", value); }

// A centred title padded with `fill` to 50 columns.
std::string Title(const std::string& title, char fill) {
  const size_t width = 50;
  const size_t left = (width - std::min(width, title.size())) / 2;
  const size_t right = width - std::min(width, title.size()) - left;
  return std::string(left, fill) + title + std::string(right, fill) + "\n";
}

std::string LatencyBlock(const std::string& title, const std::string& name, const LatencyStats& s) {
  return Title(title, '-') + Row(absl::StrCat("Mean ", name, " (ms):"), Fixed2(s.mean)) +
         Row(absl::StrCat("Median ", name, " (ms):"), Fixed2(s.median)) +
         Row(absl::StrCat("P99 ", name, " (ms):"), Fixed2(s.p99));
}

void AddLatency(const std::string& key, const LatencyStats& s, nlohmann::json* out) {
  (*out)["mean_" + key + "_ms"] = s.mean;
  (*out)["median_" + key + "_ms"] = s.median;
  (*out)["std_" + key + "_ms"] = s.std;
  (*out)["p99_" + key + "_ms"] = s.p99;
}

}  // namespace

LatencyStats StatsMs(std::vector<double> seconds) {
  LatencyStats s;
  if (seconds.empty()) return s;
  std::sort(seconds.begin(), seconds.end());
  double sum = 0;
  for (double v : seconds) sum += v;
  const double mean = sum / static_cast<double>(seconds.size());
  double squares = 0;
  for (double v : seconds) squares += (v - mean) * (v - mean);
  s.mean = mean * 1e3;
  s.std = std::sqrt(squares / static_cast<double>(seconds.size())) * 1e3;
  s.median = Percentile(seconds, 50) * 1e3;
  s.p99 = Percentile(seconds, 99) * 1e3;
  return s;
}

Summary Summarize(const std::vector<RequestRecord>& records, double duration) {
  Summary out;
  out.duration = duration;
  std::vector<double> ttfts, tpots, itls, e2els;
  for (const RequestRecord& r : records) {
    if (!r.ok) {
      ++out.failed;
      if (std::find(out.errors.begin(), out.errors.end(), r.error) == out.errors.end()) out.errors.push_back(r.error);
      continue;
    }
    ++out.completed;
    out.total_input_tokens += r.input_tokens;
    out.total_output_tokens += r.output_tokens;
    ttfts.push_back(r.ttft);
    e2els.push_back(r.e2el);
    if (r.output_tokens > 1) tpots.push_back((r.e2el - r.ttft) / static_cast<double>(r.output_tokens - 1));
    itls.insert(itls.end(), r.itls.begin(), r.itls.end());
  }
  if (duration > 0) {
    out.request_throughput = static_cast<double>(out.completed) / duration;
    out.output_throughput = static_cast<double>(out.total_output_tokens) / duration;
    out.total_token_throughput = static_cast<double>(out.total_input_tokens + out.total_output_tokens) / duration;
  }
  out.ttft = StatsMs(std::move(ttfts));
  out.tpot = StatsMs(std::move(tpots));
  out.itl = StatsMs(std::move(itls));
  out.e2el = StatsMs(std::move(e2els));
  return out;
}

std::string FormatSummary(const RunSettings& settings, const Summary& s) {
  std::string out = Title(" Serving Benchmark Result ", '=');
  out += Row("Successful requests:", absl::StrCat(s.completed));
  out += Row("Failed requests:", absl::StrCat(s.failed));
  if (settings.max_concurrency > 0) out += Row("Maximum request concurrency:", absl::StrCat(settings.max_concurrency));
  out += Row("Request rate configured (RPS):",
             std::isinf(settings.request_rate) ? "inf" : Fixed2(settings.request_rate));
  out += Row("Benchmark duration (s):", Fixed2(s.duration));
  out += Row("Total input tokens:", absl::StrCat(s.total_input_tokens));
  out += Row("Total generated tokens:", absl::StrCat(s.total_output_tokens));
  out += Row("Request throughput (req/s):", Fixed2(s.request_throughput));
  out += Row("Output token throughput (tok/s):", Fixed2(s.output_throughput));
  out += Row("Total Token throughput (tok/s):", Fixed2(s.total_token_throughput));
  out += LatencyBlock("Time to First Token", "TTFT", s.ttft);
  out += LatencyBlock("Time per Output Token (excl. 1st token)", "TPOT", s.tpot);
  out += LatencyBlock("Inter-token Latency", "ITL", s.itl);
  out += LatencyBlock("End-to-end Latency", "E2EL", s.e2el);
  out += std::string(50, '=') + "\n";
  return out;
}

nlohmann::json SummaryJson(const RunSettings& settings, const Summary& s) {
  nlohmann::json out;
  out["backend"] = "mcserve-grpc";
  out["address"] = settings.address;
  out["model_id"] = settings.model;
  out["num_prompts"] = settings.num_prompts;
  out["input_len"] = settings.input_len;
  out["output_len"] = settings.output_len;
  out["seed"] = settings.seed;
  out["max_concurrency"] = settings.max_concurrency > 0 ? nlohmann::json(settings.max_concurrency) : nullptr;
  out["request_rate"] = std::isinf(settings.request_rate) ? nlohmann::json("inf") : nlohmann::json(settings.request_rate);
  out["duration"] = s.duration;
  out["completed"] = s.completed;
  out["failed"] = s.failed;
  out["total_input_tokens"] = s.total_input_tokens;
  out["total_output_tokens"] = s.total_output_tokens;
  out["request_throughput"] = s.request_throughput;
  out["output_throughput"] = s.output_throughput;
  out["total_token_throughput"] = s.total_token_throughput;
  AddLatency("ttft", s.ttft, &out);
  AddLatency("tpot", s.tpot, &out);
  AddLatency("itl", s.itl, &out);
  AddLatency("e2el", s.e2el, &out);
  out["errors"] = s.errors;
  return out;
}

}  // namespace mcserve::bench

#include "bench/serve_load_runner.h"

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace mcserve::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point from, Clock::time_point to) { return std::chrono::duration<double>(to - from).count(); }

// A cap on the requests in flight (a counting semaphore that also allows "no cap").
class InFlightLimit {
 public:
  explicit InFlightLimit(int limit) : limit_(limit) {}
  // Blocks until a request may start. The dispatching thread.
  void Acquire() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return limit_ <= 0 || in_flight_ < limit_; });
    ++in_flight_;
  }
  // A request finished. Any thread.
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    --in_flight_;
    cv_.notify_all();
  }

 private:
  const int limit_;
  std::mutex mu_;
  std::condition_variable cv_;
  int in_flight_ = 0;
};

}  // namespace

RequestRecord TimeRequest(client::GenerationClient& client, const v1::GenerateRequest& request) {
  RequestRecord record;
  record.input_tokens = request.has_token_ids() ? request.token_ids().ids_size() : 0;
  const Clock::time_point start = Clock::now();
  Clock::time_point last = start;
  auto on_chunk = [&](const v1::GenerateResponse& response) {
    const int tokens = response.token_ids_size();
    if (tokens == 0) return;
    const Clock::time_point now = Clock::now();
    if (record.output_tokens == 0) {
      record.ttft = Seconds(start, now);
      record.itls.insert(record.itls.end(), static_cast<size_t>(tokens - 1), 0.0);  // came with the first
    } else {
      const double gap = Seconds(last, now) / tokens;
      record.itls.insert(record.itls.end(), static_cast<size_t>(tokens), gap);
    }
    record.output_tokens += tokens;
    last = now;
  };
  absl::StatusOr<v1::Completion> completion = client.Generate(request, on_chunk);
  record.e2el = Seconds(start, Clock::now());
  if (!completion.ok()) {
    record.error = absl::StrCat(absl::StatusCodeToString(completion.status().code()), ": ",
                                completion.status().message());
    return record;
  }
  if (record.output_tokens == 0) {
    record.error = "no token was generated";
    return record;
  }
  record.ok = true;
  return record;
}

LoadResult RunLoad(client::GenerationClient& client, const std::vector<v1::GenerateRequest>& requests,
                   const LoadPlan& plan) {
  LoadResult result;
  result.records.resize(requests.size());
  std::mt19937_64 rng(plan.seed);
  const bool poisson = std::isfinite(plan.request_rate) && plan.request_rate > 0;
  std::exponential_distribution<double> interval(poisson ? plan.request_rate : 1.0);
  InFlightLimit limit(plan.max_concurrency);
  std::vector<std::thread> streams;
  streams.reserve(requests.size());
  const Clock::time_point start = Clock::now();
  Clock::time_point arrival = start;
  for (size_t i = 0; i < requests.size(); ++i) {
    std::this_thread::sleep_until(arrival);
    limit.Acquire();
    streams.emplace_back([&, i] {
      result.records[i] = TimeRequest(client, requests[i]);
      limit.Release();
    });
    if (poisson) {
      arrival += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(interval(rng)));
    }
  }
  for (std::thread& t : streams) t.join();
  result.duration = Seconds(start, Clock::now());
  return result;
}

}  // namespace mcserve::bench

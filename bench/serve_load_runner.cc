#include "bench/serve_load_runner.h"

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <utility>

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
  // Blocks until no request is in flight. The dispatching thread.
  void AwaitIdle() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return in_flight_ == 0; });
  }

 private:
  const int limit_;
  std::mutex mu_;
  std::condition_variable cv_;
  int in_flight_ = 0;
};

// One stream's clock. Its callbacks run one at a time (GenerateAsync), so it needs no lock.
struct StreamTimer {
  RequestRecord* record;
  Clock::time_point start = Clock::now();
  Clock::time_point last = start;

  // A response arrived carrying `tokens` tokens.
  void Chunk(int tokens) {
    if (tokens == 0) return;
    const Clock::time_point now = Clock::now();
    if (record->output_tokens == 0) {
      record->ttft = Seconds(start, now);
      record->itls.insert(record->itls.end(), static_cast<size_t>(tokens - 1), 0.0);  // came with the first
    } else {
      const double gap = Seconds(last, now) / tokens;
      record->itls.insert(record->itls.end(), static_cast<size_t>(tokens), gap);
    }
    record->output_tokens += tokens;
    last = now;
  }

  // The stream ended with `status`.
  void Done(const absl::Status& status) {
    record->e2el = Seconds(start, Clock::now());
    if (!status.ok()) {
      record->error = absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message());
    } else if (record->output_tokens == 0) {
      record->error = "no token was generated";
    } else {
      record->ok = true;
    }
  }
};

}  // namespace

void StartTimedRequest(client::GenerationClient& client, const v1::GenerateRequest& request, RequestRecord* record,
                       std::function<void()> on_done) {
  record->input_tokens = request.has_token_ids() ? request.token_ids().ids_size() : 0;
  auto timer = std::make_shared<StreamTimer>(StreamTimer{.record = record});
  client.GenerateAsync(
      request, [timer](const v1::GenerateResponse& response) { timer->Chunk(response.token_ids_size()); },
      [timer, on_done = std::move(on_done)](absl::StatusOr<v1::Completion> completion) {
        timer->Done(completion.status());
        on_done();
      });
}

LoadResult RunLoad(client::GenerationClient& client, const std::vector<v1::GenerateRequest>& requests,
                   const LoadPlan& plan) {
  LoadResult result;
  result.records.resize(requests.size());
  std::mt19937_64 rng(plan.seed);
  const bool poisson = std::isfinite(plan.request_rate) && plan.request_rate > 0;
  std::exponential_distribution<double> interval(poisson ? plan.request_rate : 1.0);
  InFlightLimit limit(plan.max_concurrency);
  const Clock::time_point start = Clock::now();
  Clock::time_point arrival = start;
  for (size_t i = 0; i < requests.size(); ++i) {
    std::this_thread::sleep_until(arrival);
    limit.Acquire();
    StartTimedRequest(client, requests[i], &result.records[i], [&limit] { limit.Release(); });
    if (poisson) {
      arrival += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(interval(rng)));
    }
  }
  limit.AwaitIdle();
  result.duration = Seconds(start, Clock::now());
  return result;
}

}  // namespace mcserve::bench

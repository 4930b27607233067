#include "engine/serving/output_channel.h"

#include <chrono>
#include <utility>

namespace mcserve::engine {
namespace {

// absl::Duration → a wait bound for std::condition_variable (infinite → ~100 years).
std::chrono::nanoseconds ToChrono(absl::Duration d) {
  if (d == absl::InfiniteDuration() || d > absl::Hours(24 * 365 * 100)) {
    return std::chrono::hours(24 * 365 * 100);
  }
  if (d < absl::ZeroDuration()) return std::chrono::nanoseconds(0);
  return absl::ToChronoNanoseconds(d);
}

}  // namespace

void LoopWaker::Notify() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_ = true;
  }
  cv_.notify_all();
}

bool LoopWaker::Wait(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool notified = cv_.wait_for(lock, ToChrono(timeout), [this] { return pending_; });
  pending_ = false;
  return notified;
}

OutputChannel::OutputChannel(size_t capacity, std::shared_ptr<LoopWaker> waker)
    : capacity_(capacity < 1 ? 1 : capacity), waker_(std::move(waker)) {}

bool OutputChannel::HasRoom() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !closed_ && events_.size() < capacity_;
}

bool OutputChannel::Push(OutputEvent event) {
  if (!PushQuietly(std::move(event))) return false;
  WakeConsumer();
  return true;
}

bool OutputChannel::PushQuietly(OutputEvent event) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_ || events_.size() >= capacity_) return false;
  events_.push_back(std::move(event));
  unannounced_ = true;
  return true;
}

void OutputChannel::WakeConsumer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!unannounced_) return;
    unannounced_ = false;
  }
  cv_.notify_all();
  NotifyListener();
}

void OutputChannel::Finish(OutputEvent event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    events_.push_back(std::move(event));
    closed_ = true;
    unannounced_ = false;  // woken below, for every event
  }
  cv_.notify_all();
  NotifyListener();
}

bool OutputChannel::closed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_;
}

void OutputChannel::Cancel() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cancelled_ || closed_) {
      cancelled_ = true;
      return;
    }
    cancelled_ = true;
  }
  if (waker_ != nullptr) waker_->Notify();
}

bool OutputChannel::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

absl::StatusOr<OutputEvent> OutputChannel::Next(absl::Duration timeout) {
  bool was_full = false;
  OutputEvent event;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, ToChrono(timeout), [this] { return !events_.empty() || closed_; })) {
      return absl::DeadlineExceededError("no output event within the timeout");
    }
    if (events_.empty()) return absl::OutOfRangeError("the request's stream has ended");
    event = PopLocked(&was_full);
  }
  // A full channel held its request back from decoding; tell the engine loop there is room again.
  if (was_full && waker_ != nullptr) waker_->Notify();
  return event;
}

std::optional<OutputEvent> OutputChannel::TryNext() {
  bool was_full = false;
  OutputEvent event;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (events_.empty()) return std::nullopt;
    event = PopLocked(&was_full);
  }
  if (was_full && waker_ != nullptr) waker_->Notify();
  return event;
}

OutputEvent OutputChannel::PopLocked(bool* was_full) {
  *was_full = events_.size() >= capacity_;
  OutputEvent event = std::move(events_.front());
  events_.pop_front();
  return event;
}

void OutputChannel::SetListener(std::function<void()> listener) {
  bool pending = false;
  {
    std::lock_guard<std::mutex> lock(listener_mu_);
    listener_ = std::move(listener);
    if (!listener_) return;
    {
      std::lock_guard<std::mutex> events_lock(mu_);
      pending = !events_.empty();
    }
    if (pending) listener_();
  }
}

void OutputChannel::NotifyListener() {
  std::lock_guard<std::mutex> lock(listener_mu_);
  if (listener_) listener_();
}

size_t OutputChannel::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.size();
}

}  // namespace mcserve::engine

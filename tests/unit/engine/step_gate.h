// StepGate: lets a test hold a runner's Step calls at a chosen step number — the engine loop blocks
// inside that step until the test resumes it. Thread-safe: Enter from the engine loop, the rest from
// the test thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace mcserve::engine::testing {

class StepGate {
 public:
  // Called at the start of every Step: blocks while the gate holds this step, then counts it.
  void Enter() {
    std::unique_lock<std::mutex> lock(mu_);
    if (pause_at_ >= 0 && step_count_ >= pause_at_) {
      blocked_ = true;
      cv_.notify_all();
      cv_.wait(lock, [this] { return pause_at_ < 0 || step_count_ < pause_at_; });
      blocked_ = false;
    }
    ++step_count_;
  }
  // Step number `n` (0-based) and every later one block until Resume().
  void PauseAt(int64_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    pause_at_ = n;
  }
  // Waits (up to a generous bound) until a Step is blocked at the pause; false on timeout.
  bool WaitBlocked() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(60), [this] { return blocked_; });
  }
  void Resume() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      pause_at_ = -1;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t pause_at_ = -1;
  int64_t step_count_ = 0;
  bool blocked_ = false;
};

}  // namespace mcserve::engine::testing

// A small thread-safe Prometheus metrics library: a Registry of counter, gauge and histogram
// families with fixed label names and bounded label values, rendered in the text exposition format
// 0.0.4 (Prometheus-cpp is not packaged for Debian 12).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mcserve::server {

// The Content-Type of Registry::Render()'s output (serve it on GET /metrics).
inline constexpr char kMetricsContentType[] = "text/plain; version=0.0.4; charset=utf-8";
// The default bound on distinct label-value tuples (children) per family.
inline constexpr int kDefaultMaxChildren = 64;

// OK when `name` matches [a-zA-Z_:][a-zA-Z0-9_:]* (so `mcserve:num_requests_running` is legal).
absl::Status ValidateMetricName(std::string_view name);
// OK when `name` matches [a-zA-Z_][a-zA-Z0-9_]* and does not start with "__" (reserved).
absl::Status ValidateLabelName(std::string_view name);
// Label value escaping of the text format: backslash, double quote and newline.
std::string EscapeLabelValue(std::string_view value);
// HELP text escaping of the text format: backslash and newline.
std::string EscapeHelp(std::string_view help);
// A sample value Prometheus parses: "NaN", "+Inf", "-Inf", integers without exponent or fraction
// (below 2^53), otherwise the shortest round-trip decimal.
std::string FormatValue(double value);

// A monotonically increasing value. Lock-free; any thread.
class Counter {
 public:
  // Adds `delta`; negative or NaN deltas are ignored (a counter never decreases).
  void Increment(double delta = 1.0);
  // Raises the value to `total` if it is larger (mirrors a cumulative total kept elsewhere).
  void IncreaseTo(double total);
  // The current value.
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// A value that goes up and down, or is read from a callback at render time. Any thread.
class Gauge {
 public:
  // Stores `value` (ignored while a callback is set).
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  // Adds / subtracts `delta` (lock-free).
  void Increment(double delta = 1.0);
  void Decrement(double delta = 1.0) { Increment(-delta); }
  // From now on Value() (and so Render) calls `fn` instead of reading the stored value; null clears
  // it. `fn` runs on the rendering thread and must not call into the Registry.
  void SetCallback(std::function<double()> fn);
  // The callback's result if one is set, else the stored value.
  double Value() const;

 private:
  std::atomic<double> value_{0.0};
  mutable std::mutex callback_mu_;
  std::function<double()> callback_;
};

// Observations counted into fixed buckets (upper bounds, le), plus their sum and count. A small
// mutex per histogram; any thread.
class Histogram {
 public:
  // `bounds` strictly increasing and finite (validated by Registry::AddHistogram).
  explicit Histogram(std::vector<double> bounds);
  // Counts `value` in the first bucket with value <= bound (and +Inf); NaN is ignored.
  void Observe(double value);

  struct Snapshot {
    std::vector<double> bounds;             // [B] finite upper bounds; +Inf is implicit
    std::vector<uint64_t> cumulative;       // [B + 1] observations <= bounds[i]; last = +Inf = count
    double sum = 0.0;
    uint64_t count = 0;
  };
  // A consistent copy with cumulative bucket counts.
  Snapshot Collect() const;

 private:
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // [B + 1] per-bucket (not cumulative); guarded by mu_
  double sum_ = 0.0;              // guarded by mu_
  uint64_t count_ = 0;            // guarded by mu_
};

// The TYPE line of a family.
enum class MetricType { kCounter, kGauge, kHistogram };

// Name, help, type and label names shared by one family's children. Any thread.
class FamilyBase {
 public:
  virtual ~FamilyBase() = default;
  // The metric name and the label names, fixed at registration.
  const std::string& name() const { return name_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  // Appends HELP, TYPE and every child's samples to `out`.
  void RenderTo(std::string* out) const;

 protected:
  FamilyBase(std::string name, std::string help, MetricType type, std::vector<std::string> label_names,
             int max_children);
  // Checks the tuple's arity, its UTF-8 and the child cap; names the family and labels in errors.
  absl::Status CheckNewChild(const std::vector<std::string>& values, size_t num_children) const;
  virtual void RenderChildren(std::string* out) const = 0;
  // `{a="x",b="y"` plus `extra` (e.g. `le="0.1"`) and `}`; empty when there is nothing to print.
  std::string LabelText(const std::vector<std::string>& values, std::string_view extra = {}) const;

  const std::string name_, help_;
  const MetricType type_;
  const std::vector<std::string> label_names_;
  const int max_children_;
};

// One metric family: children created per label-value tuple, at most `max_children` of them.
// T is Counter, Gauge or Histogram. Any thread; child pointers stay valid as long as the Registry.
template <typename T>
class Family : public FamilyBase {
 public:
  // The child for `values` (one per label name, in order), created on first use. InvalidArgument
  // for a wrong number of values or invalid UTF-8; ResourceExhausted past the child cap.
  absl::StatusOr<T*> Get(const std::vector<std::string>& values);
  absl::StatusOr<T*> Get(std::initializer_list<std::string_view> values) {
    return Get(std::vector<std::string>(values.begin(), values.end()));
  }

 private:
  friend class Registry;
  Family(std::string name, std::string help, MetricType type, std::vector<std::string> label_names,
         int max_children, std::vector<double> bounds = {})
      : FamilyBase(std::move(name), std::move(help), type, std::move(label_names), max_children),
        bounds_(std::move(bounds)) {}
  void RenderChildren(std::string* out) const override;

  const std::vector<double> bounds_;  // histograms only
  mutable std::mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<T>> children_;  // guarded by mu_; sorted
};

// Owns the families and renders them, in registration order. Any thread.
class Registry {
 public:
  explicit Registry(int max_children_per_family = kDefaultMaxChildren)
      : max_children_(max_children_per_family) {}
  // Not copyable: children are handed out by pointer.
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Register a family. InvalidArgument for a bad metric or label name (or duplicate label names,
  // or `le` on a histogram, or buckets not strictly increasing and finite apart from a trailing
  // +Inf, which is implied); AlreadyExists for a name already registered.
  absl::StatusOr<Family<Counter>*> AddCounter(std::string_view name, std::string_view help,
                                              std::vector<std::string> label_names = {});
  absl::StatusOr<Family<Gauge>*> AddGauge(std::string_view name, std::string_view help,
                                          std::vector<std::string> label_names = {});
  absl::StatusOr<Family<Histogram>*> AddHistogram(std::string_view name, std::string_view help,
                                                  std::vector<std::string> label_names,
                                                  std::vector<double> buckets);

  // Runs `hook` at the start of every Render (e.g. to pull engine stats into gauges and counters).
  // Hooks run on the rendering thread, with no Registry lock held.
  void AddRenderHook(std::function<void()> hook);

  // The whole registry in the text exposition format 0.0.4 (kMetricsContentType).
  std::string Render() const;

 private:
  absl::Status CheckNew(std::string_view name, const std::vector<std::string>& label_names) const;

  const int max_children_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<FamilyBase>> families_;  // guarded by mu_
  std::vector<std::function<void()>> hooks_;           // guarded by mu_
};

extern template class Family<Counter>;
extern template class Family<Gauge>;
extern template class Family<Histogram>;

}  // namespace mcserve::server

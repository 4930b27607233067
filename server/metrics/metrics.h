// Prometheus metrics on prometheus-cpp (Debian's prometheus-cpp-dev, core library only): a Registry of
// counter, gauge and histogram families with fixed label names and a bound on label-value tuples,
// rendered in the text exposition format 0.0.4 by prometheus-cpp's TextSerializer. Serving the text
// is the HTTP front end's job (GET /metrics on our own port); prometheus-cpp's exposer is not used.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace mcserve::server {

// The Content-Type of Registry::Render()'s output (serve it on GET /metrics).
inline constexpr char kMetricsContentType[] = "text/plain; version=0.0.4; charset=utf-8";
// The default bound on distinct label-value tuples (children) per family.
inline constexpr int kDefaultMaxChildren = 64;

using Counter = prometheus::Counter;      // Increment(delta ≥ 0), Value(); any thread
using Gauge = prometheus::Gauge;          // Set, Increment, Decrement, Value(); any thread
using Histogram = prometheus::Histogram;  // Observe(value); any thread

// Raises `counter` to `total` when that is larger (a cumulative total kept elsewhere, e.g. the
// engine's); never lowers it. Any thread (serialised, so two scrapes never add the same delta twice).
void AdvanceTo(Counter& counter, double total);

// The label names and, for histograms, the bucket bounds of one family.
struct FamilySpec {
  std::vector<std::string> label_names;
  std::vector<double> buckets;  // histograms: strictly increasing, finite (a trailing +Inf is dropped)
};

// One metric family: children per label-value tuple (one value per label name, in order), created on
// first use, at most `max_children` of them. Any thread; child pointers stay valid as long as the
// Registry.
template <typename T>
class Family {
 public:
  // The child for `values`. InvalidArgument for a wrong number of values or invalid UTF-8;
  // ResourceExhausted past the child cap.
  absl::StatusOr<T*> Get(const std::vector<std::string>& values);
  absl::StatusOr<T*> Get(std::initializer_list<std::string_view> values) {
    return Get(std::vector<std::string>(values.begin(), values.end()));
  }

 private:
  friend class Registry;
  Family(prometheus::Family<T>& family, FamilySpec spec, int max_children)
      : family_(family), spec_(std::move(spec)), max_children_(max_children) {}

  prometheus::Family<T>& family_;
  const FamilySpec spec_;
  const int max_children_;
  std::mutex mu_;        // serialises child creation against the cap
  size_t children_ = 0;  // guarded by mu_
};

// Owns the families (prometheus::Registry) and renders them. Any thread.
class Registry {
 public:
  explicit Registry(int max_children_per_family = kDefaultMaxChildren);
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Register a family. InvalidArgument for a bad metric or label name (or duplicate label names, or
  // `le` on a histogram, or buckets not strictly increasing and finite apart from a trailing +Inf);
  // AlreadyExists for a name already registered.
  absl::StatusOr<Family<Counter>*> AddCounter(std::string_view name, std::string_view help,
                                              std::vector<std::string> label_names = {});
  absl::StatusOr<Family<Gauge>*> AddGauge(std::string_view name, std::string_view help,
                                          std::vector<std::string> label_names = {});
  absl::StatusOr<Family<Histogram>*> AddHistogram(std::string_view name, std::string_view help,
                                                  std::vector<std::string> label_names, std::vector<double> buckets);

  // Runs `hook` at the start of every Render (e.g. to pull engine stats into gauges and counters).
  // Hooks run on the rendering thread with no Registry lock held.
  void AddRenderHook(std::function<void()> hook);

  // The whole registry in the text exposition format 0.0.4 (kMetricsContentType).
  std::string Render() const;

 private:
  // Checks the name is new and the spec valid, then builds the family with `build`.
  template <typename T, typename Builder>
  absl::StatusOr<Family<T>*> Add(std::string_view name, std::string_view help, FamilySpec spec, Builder build);

  const int max_children_;
  prometheus::Registry registry_;
  mutable std::mutex mu_;
  std::set<std::string, std::less<>> names_;             // guarded by mu_
  std::vector<std::shared_ptr<void>> families_;          // guarded by mu_: our Family<T> wrappers
  std::vector<std::function<void()>> hooks_;             // guarded by mu_
};

extern template class Family<Counter>;
extern template class Family<Gauge>;
extern template class Family<Histogram>;

}  // namespace mcserve::server

#include "server/metrics/metrics.h"

#include <cmath>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "prometheus/check_names.h"
#include "prometheus/text_serializer.h"

namespace mcserve::server {
namespace {

// True for well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF): the text
// format carries label values as UTF-8.
bool ValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const int extra = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : -1;
    if (extra < 0 || i + extra >= s.size() + (extra == 0 ? 1 : 0)) return false;
    uint32_t cp = extra == 0 ? c : c & (0x7F >> (extra + 1));
    for (int k = 1; k <= extra; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += extra + 1;
  }
  return true;
}

absl::Status CheckSpec(std::string_view name, const FamilySpec& spec, bool histogram) {
  std::set<std::string_view> seen;
  for (const std::string& label : spec.label_names) {
    if (!seen.insert(label).second) {
      return absl::InvalidArgumentError(absl::StrCat("metrics: ", std::string(name), ": label \"", label, "\" given twice"));
    }
    if (histogram && label == "le") {
      return absl::InvalidArgumentError(absl::StrCat("metrics: ", std::string(name), ": a histogram cannot have the label le"));
    }
  }
  for (size_t i = 0; i < spec.buckets.size(); ++i) {
    if (!std::isfinite(spec.buckets[i]) || (i > 0 && spec.buckets[i] <= spec.buckets[i - 1])) {
      return absl::InvalidArgumentError(absl::StrCat("metrics: ", std::string(name), ": buckets must be finite and strictly "
                                                     "increasing (a trailing +Inf is implied), got ",
                                                     absl::StrJoin(spec.buckets, ", ")));
    }
  }
  return absl::OkStatus();
}

}  // namespace

void AdvanceTo(Counter& counter, double total) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const double now = counter.Value();
  if (total > now) counter.Increment(total - now);
}

template <typename T>
absl::StatusOr<T*> Family<T>::Get(const std::vector<std::string>& values) {
  if (values.size() != spec_.label_names.size()) {
    return absl::InvalidArgumentError(absl::StrCat("metrics: ", values.size(), " label values for the labels {",
                                                   absl::StrJoin(spec_.label_names, ", "), "}"));
  }
  prometheus::Labels labels;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!ValidUtf8(values[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("metrics: label ", spec_.label_names[i], ": value is not valid UTF-8"));
    }
    labels[spec_.label_names[i]] = values[i];
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!family_.Has(labels) && ++children_ > static_cast<size_t>(max_children_)) {
    --children_;
    return absl::ResourceExhaustedError(absl::StrCat(
        "metrics: a family already has ", max_children_,
        " label-value combinations (the cap); labels must have bounded cardinality (never a request id)"));
  }
  if constexpr (std::is_same_v<T, Histogram>) {
    return &family_.Add(labels, Histogram::BucketBoundaries(spec_.buckets));
  } else {
    return &family_.Add(labels);
  }
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

Registry::Registry(int max_children_per_family) : max_children_(max_children_per_family) {}
Registry::~Registry() = default;

template <typename T, typename Builder>
absl::StatusOr<Family<T>*> Registry::Add(std::string_view name, std::string_view help, FamilySpec spec,
                                         Builder build) {
  if (!prometheus::CheckMetricName(std::string(name))) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics: invalid metric name \"", std::string(name), "\" (must match [a-zA-Z_:][a-zA-Z0-9_:]*)"));
  }
  for (const std::string& label : spec.label_names) {
    if (!prometheus::CheckLabelName(label)) {
      return absl::InvalidArgumentError(absl::StrCat("metrics: ", std::string(name), ": invalid label name \"", label,
                                                     "\" (must match [a-zA-Z_][a-zA-Z0-9_]*, no leading __)"));
    }
  }
  if (absl::Status s = CheckSpec(name, spec, std::is_same_v<T, Histogram>); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  if (names_.contains(name)) {
    return absl::AlreadyExistsError(absl::StrCat("metrics: ", std::string(name), " is already registered"));
  }
  prometheus::Family<T>& family = build().Name(std::string(name)).Help(std::string(help)).Register(registry_);
  auto wrapper = std::shared_ptr<Family<T>>(new Family<T>(family, std::move(spec), max_children_));
  families_.push_back(wrapper);
  names_.insert(std::string(name));
  return wrapper.get();
}

absl::StatusOr<Family<Counter>*> Registry::AddCounter(std::string_view name, std::string_view help,
                                                      std::vector<std::string> label_names) {
  return Add<Counter>(name, help, {std::move(label_names), {}}, [] { return prometheus::BuildCounter(); });
}

absl::StatusOr<Family<Gauge>*> Registry::AddGauge(std::string_view name, std::string_view help,
                                                  std::vector<std::string> label_names) {
  return Add<Gauge>(name, help, {std::move(label_names), {}}, [] { return prometheus::BuildGauge(); });
}

absl::StatusOr<Family<Histogram>*> Registry::AddHistogram(std::string_view name, std::string_view help,
                                                          std::vector<std::string> label_names,
                                                          std::vector<double> buckets) {
  if (!buckets.empty() && std::isinf(buckets.back()) && buckets.back() > 0) buckets.pop_back();
  return Add<Histogram>(name, help, {std::move(label_names), std::move(buckets)},
                        [] { return prometheus::BuildHistogram(); });
}

void Registry::AddRenderHook(std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(mu_);
  hooks_.push_back(std::move(hook));
}

std::string Registry::Render() const {
  std::vector<std::function<void()>> hooks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    hooks = hooks_;
  }
  for (const auto& hook : hooks) hook();
  return prometheus::TextSerializer().Serialize(registry_.Collect());
}

}  // namespace mcserve::server

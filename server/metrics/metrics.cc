#include "server/metrics/metrics.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mcserve::server {
namespace {

// Debian's Abseil has its own string_view type: convert before StrCat.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

bool IsNameStart(char c, bool colon_ok) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon_ok && c == ':');
}
bool IsNameChar(char c, bool colon_ok) { return IsNameStart(c, colon_ok) || (c >= '0' && c <= '9'); }

bool ValidName(std::string_view name, bool colon_ok) {
  if (name.empty() || !IsNameStart(name[0], colon_ok)) return false;
  for (char c : name) {
    if (!IsNameChar(c, colon_ok)) return false;
  }
  return true;
}

// Well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF).
bool ValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int extra = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      extra = 1, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + extra >= s.size()) return false;  // truncated sequence
    for (int k = 1; k <= extra; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    static constexpr uint32_t kMin[4] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += extra + 1;
  }
  return true;
}

const char* TypeName(MetricType t) {
  switch (t) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
  }
  return "untyped";
}

void AtomicAdd(std::atomic<double>& a, double delta) {
  double cur = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(cur, cur + delta, std::memory_order_relaxed)) {
  }
}

}  // namespace

absl::Status ValidateMetricName(std::string_view name) {
  if (ValidName(name, /*colon_ok=*/true)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("metrics: invalid metric name \"", Sv(name), "\" (must match [a-zA-Z_:][a-zA-Z0-9_:]*)"));
}

absl::Status ValidateLabelName(std::string_view name) {
  if (ValidName(name, /*colon_ok=*/false) && name.substr(0, 2) != "__") return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "metrics: invalid label name \"", Sv(name), "\" (must match [a-zA-Z_][a-zA-Z0-9_]*, no leading __)"));
}

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string EscapeHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::floor(value) && std::fabs(value) < 9007199254740992.0) {  // 2^53
    return std::to_string(static_cast<int64_t>(value));
  }
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), value);  // shortest round-trip
  return std::string(buf, res.ptr);
}

// ---- Counter, Gauge, Histogram ----

void Counter::Increment(double delta) {
  if (!(delta >= 0.0)) return;  // negative or NaN
  AtomicAdd(value_, delta);
}

void Counter::IncreaseTo(double total) {
  double cur = value_.load(std::memory_order_relaxed);
  while (total > cur && !value_.compare_exchange_weak(cur, total, std::memory_order_relaxed)) {
  }
}

void Gauge::Increment(double delta) { AtomicAdd(value_, delta); }

void Gauge::SetCallback(std::function<double()> fn) {
  std::lock_guard<std::mutex> lock(callback_mu_);
  callback_ = std::move(fn);
}

double Gauge::Value() const {
  std::function<double()> fn;
  {
    std::lock_guard<std::mutex> lock(callback_mu_);
    fn = callback_;
  }
  return fn ? fn() : value_.load(std::memory_order_relaxed);
}

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  if (std::isnan(value)) return;
  size_t b = 0;
  while (b < bounds_.size() && value > bounds_[b]) ++b;  // first bound >= value, else +Inf
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[b];
  sum_ += value;
  ++count_;
}

Histogram::Snapshot Histogram::Collect() const {
  Snapshot s;
  s.bounds = bounds_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s.cumulative = counts_;
    s.sum = sum_;
    s.count = count_;
  }
  for (size_t i = 1; i < s.cumulative.size(); ++i) s.cumulative[i] += s.cumulative[i - 1];
  return s;
}

// ---- Families ----

FamilyBase::FamilyBase(std::string name, std::string help, MetricType type,
                       std::vector<std::string> label_names, int max_children)
    : name_(std::move(name)),
      help_(std::move(help)),
      type_(type),
      label_names_(std::move(label_names)),
      max_children_(max_children) {}

void FamilyBase::RenderTo(std::string* out) const {
  absl::StrAppend(out, "# HELP ", name_, " ", EscapeHelp(help_), "\n");
  absl::StrAppend(out, "# TYPE ", name_, " ", TypeName(type_), "\n");
  RenderChildren(out);
}

absl::Status FamilyBase::CheckNewChild(const std::vector<std::string>& values, size_t num_children) const {
  if (values.size() != label_names_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("metrics: ", name_, " has labels {",
                                                   absl::StrJoin(label_names_, ","), "} but got ",
                                                   values.size(), " label values"));
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (!ValidUtf8(values[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("metrics: ", name_, " label ", label_names_[i], ": value is not valid UTF-8"));
    }
  }
  if (num_children >= static_cast<size_t>(max_children_)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "metrics: ", name_, " already has ", num_children, " label-value combinations (the cap is ",
        max_children_, "); labels must have bounded cardinality (never a request id)"));
  }
  return absl::OkStatus();
}

std::string FamilyBase::LabelText(const std::vector<std::string>& values, std::string_view extra) const {
  if (values.empty() && extra.empty()) return "";
  std::string s = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) s += ',';
    absl::StrAppend(&s, label_names_[i], "=\"", EscapeLabelValue(values[i]), "\"");
  }
  if (!extra.empty()) absl::StrAppend(&s, values.empty() ? "" : ",", Sv(extra));
  s += '}';
  return s;
}

template <typename T>
absl::StatusOr<T*> Family<T>::Get(const std::vector<std::string>& values) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = children_.find(values);
  if (it != children_.end()) return it->second.get();
  if (absl::Status s = CheckNewChild(values, children_.size()); !s.ok()) return s;
  std::unique_ptr<T> child;
  if constexpr (std::is_same_v<T, Histogram>) {
    child = std::make_unique<Histogram>(bounds_);
  } else {
    child = std::make_unique<T>();
  }
  T* raw = child.get();
  children_.emplace(values, std::move(child));
  return raw;
}

template <typename T>
void Family<T>::RenderChildren(std::string* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [values, child] : children_) {
    if constexpr (std::is_same_v<T, Histogram>) {
      const Histogram::Snapshot s = child->Collect();
      for (size_t b = 0; b <= s.bounds.size(); ++b) {
        const std::string le = b < s.bounds.size() ? FormatValue(s.bounds[b]) : "+Inf";
        absl::StrAppend(out, name_, "_bucket", LabelText(values, absl::StrCat("le=\"", le, "\"")), " ",
                        s.cumulative[b], "\n");
      }
      absl::StrAppend(out, name_, "_sum", LabelText(values), " ", FormatValue(s.sum), "\n");
      absl::StrAppend(out, name_, "_count", LabelText(values), " ", s.count, "\n");
    } else {
      absl::StrAppend(out, name_, LabelText(values), " ", FormatValue(child->Value()), "\n");
    }
  }
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

// ---- Registry ----

absl::Status Registry::CheckNew(std::string_view name, const std::vector<std::string>& label_names) const {
  if (absl::Status s = ValidateMetricName(name); !s.ok()) return s;
  std::set<std::string_view> seen;
  for (const std::string& l : label_names) {
    if (absl::Status s = ValidateLabelName(l); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(s.message(), " in ", Sv(name)));
    }
    if (!seen.insert(l).second) {
      return absl::InvalidArgumentError(absl::StrCat("metrics: duplicate label name \"", l, "\" in ", Sv(name)));
    }
  }
  for (const auto& f : families_) {
    if (f->name() == name) return absl::AlreadyExistsError(absl::StrCat("metrics: ", Sv(name), " is already registered"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Family<Counter>*> Registry::AddCounter(std::string_view name, std::string_view help,
                                                      std::vector<std::string> label_names) {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status s = CheckNew(name, label_names); !s.ok()) return s;
  auto* f = new Family<Counter>(std::string(name), std::string(help), MetricType::kCounter,
                                std::move(label_names), max_children_);
  families_.emplace_back(f);
  return f;
}

absl::StatusOr<Family<Gauge>*> Registry::AddGauge(std::string_view name, std::string_view help,
                                                  std::vector<std::string> label_names) {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status s = CheckNew(name, label_names); !s.ok()) return s;
  auto* f = new Family<Gauge>(std::string(name), std::string(help), MetricType::kGauge, std::move(label_names),
                              max_children_);
  families_.emplace_back(f);
  return f;
}

absl::StatusOr<Family<Histogram>*> Registry::AddHistogram(std::string_view name, std::string_view help,
                                                          std::vector<std::string> label_names,
                                                          std::vector<double> buckets) {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status s = CheckNew(name, label_names); !s.ok()) return s;
  for (const std::string& l : label_names) {
    if (l == "le") return absl::InvalidArgumentError(absl::StrCat("metrics: histogram ", Sv(name), " may not use label le"));
  }
  if (!buckets.empty() && std::isinf(buckets.back()) && buckets.back() > 0) buckets.pop_back();
  for (size_t i = 0; i < buckets.size(); ++i) {
    if (!std::isfinite(buckets[i]) || (i > 0 && !(buckets[i] > buckets[i - 1]))) {
      return absl::InvalidArgumentError(absl::StrCat("metrics: histogram ", Sv(name),
                                                     " buckets must be finite and strictly increasing (bucket ",
                                                     i, " is ", FormatValue(buckets[i]), ")"));
    }
  }
  auto* f = new Family<Histogram>(std::string(name), std::string(help), MetricType::kHistogram,
                                  std::move(label_names), max_children_, std::move(buckets));
  families_.emplace_back(f);
  return f;
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
  for (const auto& h : hooks) h();
  std::string out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& f : families_) f->RenderTo(&out);
  return out;
}

}  // namespace mcserve::server

// ConfigReader: typed access to the keys of a config.json object, every error naming the key and the
// file. Used by the config parsers of engine/model (model_config.cc and the per-family readers).
// Any thread; a reader borrows the json and the source name, which must outlive it.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace mcserve::engine {

// Typed access to config.json keys; every error names the key and the file.
class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& j, const std::string& source) : j_(j), source_(source) {}

  bool Has(const char* key) const { return j_.contains(key); }
  // Present and not null.
  bool HasValue(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }

  absl::Status Error(absl::string_view problem) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": ", problem));
  }
  absl::Status TypeError(const char* key, const char* want) const {
    return Error(absl::StrCat("\"", key, "\" must be ", want, ", got ", j_.at(key).type_name(), " ",
                              j_.at(key).dump()));
  }

  // An integer; absent → `def`. null is an error unless `null_is_default`.
  absl::StatusOr<int64_t> Int(const char* key, int64_t def, bool null_is_default = false) const {
    if (!Has(key)) return def;
    const nlohmann::json& v = j_.at(key);
    if (v.is_null() && null_is_default) return def;
    if (v.is_number_integer()) {
      if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return TypeError(key, "an integer that fits in 64 bits");
      }
      return v.get<int64_t>();
    }
    return TypeError(key, "an integer");
  }
  // A number (integers accepted); absent → `def`; null → `def` only if `null_is_default`.
  absl::StatusOr<double> Float(const char* key, double def, bool null_is_default = false) const {
    if (!Has(key)) return def;
    const nlohmann::json& v = j_.at(key);
    if (v.is_null() && null_is_default) return def;
    if (!v.is_number()) return TypeError(key, "a number");
    double d = v.get<double>();
    if (!std::isfinite(d)) return TypeError(key, "a finite number");
    return d;
  }
  absl::StatusOr<bool> Bool(const char* key, bool def) const {
    if (!Has(key)) return def;
    const nlohmann::json& v = j_.at(key);
    if (!v.is_boolean()) return TypeError(key, "true or false");
    return v.get<bool>();
  }
  // A string, or nullopt when absent or null.
  absl::StatusOr<std::optional<std::string>> OptString(const char* key) const {
    if (!HasValue(key)) return std::nullopt;
    const nlohmann::json& v = j_.at(key);
    if (!v.is_string()) return TypeError(key, "a string");
    return v.get<std::string>();
  }
  // A token id: an integer, null (→ def), or a non-empty list of integers (→ the first).
  absl::StatusOr<int64_t> TokenId(const char* key, int64_t def) const {
    if (!HasValue(key)) return def;
    const nlohmann::json& v = j_.at(key);
    if (v.is_array() && !v.empty() && v[0].is_number_integer()) return v[0].get<int64_t>();
    if (v.is_number_integer()) return v.get<int64_t>();
    return TypeError(key, "an integer token id");
  }
  const std::string& source() const { return source_; }
  absl::Status Positive(const char* key, double value) const {
    if (value > 0) return absl::OkStatus();
    return Error(absl::StrCat("\"", key, "\" must be positive, got ", value));
  }

  // The whole object (for key sets and nested values).
  const nlohmann::json& object() const { return j_; }

 private:
  const nlohmann::json& j_;
  const std::string& source_;
};

// A string field with one of `choices` (absent or null → choices[0]); returns its index.
absl::StatusOr<int> Choice(const ConfigReader& r, const char* key, std::initializer_list<const char*> choices);

}  // namespace mcserve::engine

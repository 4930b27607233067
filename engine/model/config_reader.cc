#include "engine/model/config_reader.h"

#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace mcserve::engine {

// A string field with one of `choices` (absent or null → choices[0]); returns its index.
absl::StatusOr<int> Choice(const ConfigReader& r, const char* key, std::initializer_list<const char*> choices) {
  MCSERVE_ASSIGN_OR_RETURN(auto value, r.OptString(key));
  if (!value) return 0;
  int i = 0;
  for (const char* c : choices) {
    if (*value == c) return i;
    ++i;
  }
  return r.Error(absl::StrCat("\"", key, "\" \"", *value, "\" is not supported (", absl::StrJoin(choices, ", "), ")"));
}


}  // namespace mcserve::engine

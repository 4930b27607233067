// Output of mcserve-eval passkey: a human table and a JSON object. Any thread.
#pragma once

#include <string>

#include "nlohmann/json.hpp"
#include "tools/eval/passkey.h"

namespace mcserve::tools {

// One row per trial (key, needle depth and position, the answer, right or wrong) and the accuracy.
std::string PasskeyTable(const PasskeyResult& result);

// Every number of `result`: the accuracy and every trial.
nlohmann::json PasskeyJson(const PasskeyResult& result);

}  // namespace mcserve::tools

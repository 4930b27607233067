// ReadHopeConfig: parses the `hope` family's config.json (docs/model-format.md, `hope`) into
// ModelConfig (dims) and ModelConfig::hope. Every key must be one the format defines; an unknown key,
// a value outside the allowed set, or a choice the engine does not run is an error naming the field.
// Any thread.
#pragma once

#include "absl/status/status.h"
#include "engine/model/config_reader.h"
#include "engine/model/model_config.h"

namespace mcserve::engine {

// Reads every hope field of `r` into `c` (c.family is kHope; the shared keys are read already).
absl::Status ReadHopeConfig(const ConfigReader& r, ModelConfig& c);

}  // namespace mcserve::engine

// ReadArmtConfig: parses the `armt` family's config.json (docs/model-format.md, `armt`; the
// reference's armt_config.py rules) into ModelConfig (skeleton dims) and ModelConfig::armt. An
// unknown key or an unsupported value is an error naming the field; `memory_caching` and
// `generate_policy: reference_generate` are Unimplemented. Any thread.
#pragma once

#include "absl/status/status.h"
#include "engine/model/config_reader.h"
#include "engine/model/model_config.h"

namespace mcserve::engine {

// Reads every armt field of `r` into `c` (c.family is kArmt; nothing else is read yet).
absl::Status ReadArmtConfig(const ConfigReader& r, ModelConfig& c);

}  // namespace mcserve::engine

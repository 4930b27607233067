// ReadGamConfig: parses the `gam` family's config.json (docs/model-format.md, `gam`; the reference's
// gam_config.py rules) into ModelConfig (skeleton dims) and ModelConfig::gam. An unknown key or an
// unsupported value is an error naming the field; `memory_caching` is Unimplemented (GAM has no
// recurrent memory to cache). Any thread.
#pragma once

#include "absl/status/status.h"
#include "engine/model/config_reader.h"
#include "engine/model/model_config.h"

namespace mcserve::engine {

// Reads every gam field of `r` into `c` (c.family is kGam; nothing else is read yet).
absl::Status ReadGamConfig(const ConfigReader& r, ModelConfig& c);

}  // namespace mcserve::engine

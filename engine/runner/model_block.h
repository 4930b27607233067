// Model::Block: one block's bound parts, shared by model.cc and model_adaptive.cc (private to Model).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "engine/runner/adaptive_cms.h"
#include "engine/runner/feed_forward.h"
#include "engine/runner/mixer.h"
#include "engine/runner/model.h"
#include "engine/runner/norm.h"

namespace mcserve::engine {

struct Model::Block {
  Norm attn_norm;                            // [H]
  std::unique_ptr<Mixer> mixer;
  std::vector<FeedForwardLevel> ffn;         // the MLP (one level) or HOPE's CMS levels
  std::optional<AdaptiveCmsLayer> adaptive;  // HOPE's CMS with test-time training (cms_adaptive)
};

}  // namespace mcserve::engine

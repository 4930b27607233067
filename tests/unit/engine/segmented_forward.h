// RunSegmented: Model::Forward over a batch of chunks for every family, as the engine feeds it: a
// chunk is cut where its slot's open segment ends and the slot's full segment is closed by a close
// chunk (armt, Model::SegmentTokensLeft) before its next tokens, batched with the other slots'
// pieces. For the families that never close it is exactly one Forward. Test helper; one thread.
#pragma once

#include <algorithm>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "base/status_macros.h"
#include "engine/runner/model.h"

namespace mcserve::testing {

// Per chunk, its logits [rows, vocab] (every token's with all_logits, else the last token's).
inline absl::StatusOr<std::vector<std::vector<float>>> RunSegmented(const engine::Model& model,
                                                                   engine::StatePool& pool,
                                                                   std::span<const engine::SequenceChunk> chunks) {
  const size_t vocab = static_cast<size_t>(model.config().vocab_size);
  std::vector<std::vector<float>> out(chunks.size());
  std::vector<size_t> done(chunks.size(), 0);
  while (true) {
    std::vector<engine::SequenceChunk> batch;
    std::vector<size_t> which;
    for (size_t i = 0; i < chunks.size(); ++i) {
      const size_t left = chunks[i].tokens.size() - done[i];
      if (left == 0) continue;
      const int64_t room = model.SegmentTokensLeft(pool, chunks[i].slot);
      if (room == 0) {
        batch.push_back({.slot = chunks[i].slot, .close_segment = true});
      } else {
        const size_t take = std::min(left, static_cast<size_t>(std::min<int64_t>(room, int64_t{1} << 40)));
        batch.push_back({.slot = chunks[i].slot, .tokens = chunks[i].tokens.subspan(done[i], take),
                         .all_logits = chunks[i].all_logits, .learn = chunks[i].learn});
      }
      which.push_back(i);
    }
    if (batch.empty()) break;
    MCSERVE_ASSIGN_OR_RETURN(kernels::Tensor logits, model.Forward(batch, pool));
    MCSERVE_ASSIGN_OR_RETURN(std::vector<float> host, logits.ToHostF32());
    size_t row = 0;
    for (size_t b = 0; b < batch.size(); ++b) {
      if (batch[b].close_segment) continue;
      const size_t i = which[b], n = batch[b].tokens.size(), rows = batch[b].all_logits ? n : 1;
      std::vector<float>& dst = out[i];
      if (!batch[b].all_logits) dst.clear();  // only the chunk's last token counts
      dst.insert(dst.end(), host.begin() + row * vocab, host.begin() + (row + rows) * vocab);
      row += rows;
      done[i] += n;
    }
  }
  return out;
}

}  // namespace mcserve::testing

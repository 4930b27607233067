// Finds and loads the SentencePiece module (libmcserve_sentencepiece.so; why: docs/architecture.md,
// "Process boundaries: the tokenizer module") with dlopen(RTLD_LOCAL | RTLD_DEEPBIND), once per process.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/sentencepiece_model.h"

namespace mcserve::engine::internal {

// Where the module is looked for, in order: $MCSERVE_SENTENCEPIECE_MODULE alone when set; else next to
// the running binary, in <binary dir>/../lib/mcserve/, and where the build put it.
std::vector<std::string> SentencePieceModuleCandidates();

// Opens the first of `candidates` that exists and returns its entry point. FAILED_PRECONDITION naming
// every path tried (and why each failed) when none loads. Not cached.
absl::StatusOr<NewSentencePieceModelFn> OpenSentencePieceModule(const std::vector<std::string>& candidates);

// Whether the module is opened with RTLD_DEEPBIND (false in sanitizer builds, which then cannot load it
// into a process that links protobuf: FAILED_PRECONDITION).
bool SentencePieceModuleDeepBinds();

// A new, empty model from the module (loaded on the first call from SentencePieceModuleCandidates();
// that outcome, success or error, is kept for the process).
absl::StatusOr<std::unique_ptr<SentencePieceModel>> NewSentencePieceModel();

}  // namespace mcserve::engine::internal

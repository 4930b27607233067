// The interface between the engine's Tokenizer and the SentencePiece module
// (libmcserve_sentencepiece.so, built from sentencepiece_module.cc; why a module: docs/architecture.md,
// "Process boundaries: the tokenizer module"). Std-only types and a C entry point cross the boundary;
// no Abseil here (Debian's sentencepiece_processor.h declares its own absl::string_view).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mcserve::engine::internal {

// One SentencePiece model. Never throws. Const methods are thread-safe after Load.
class SentencePieceModel {
 public:
  virtual ~SentencePieceModel() = default;
  // Loads a model file; returns an empty string on success, else the error message.
  virtual std::string Load(const std::string& path) = 0;
  // Encodes `text` into `ids`; returns an empty string on success, else the error message.
  virtual std::string Encode(std::string_view text, std::vector<int>* ids) const = 0;
  // Decodes in-vocabulary `ids` into `text`; returns an empty string on success, else the error.
  virtual std::string Decode(const std::vector<int>& ids, std::string* text) const = 0;
  // For each id in [0, PieceSize()): whether the text it decodes to is fixed wherever it follows
  // non-empty decoded text (a normal piece, or a byte piece of an ASCII byte) and that text ("▁" as
  // a space, the byte as itself) in `surface`; other ids (control, unknown, unused, non-ASCII bytes)
  // get false and an empty surface.
  virtual void ContinuationSurfaces(std::vector<std::string>* surface, std::vector<char>* known) const = 0;
  virtual int PieceSize() const = 0;
  virtual int BosId() const = 0;
  virtual int EosId() const = 0;
};

// The module's entry point, resolved by name: returns a new, empty model (the caller deletes it), or
// null if `abi_version` is not the module's kSentencePieceModuleAbi.
using NewSentencePieceModelFn = SentencePieceModel* (*)(int abi_version);
inline constexpr char kNewSentencePieceModelSymbol[] = "mcserve_new_sentencepiece_model";
// Bumped whenever SentencePieceModel changes.
inline constexpr int kSentencePieceModuleAbi = 2;
// The module's file name.
inline constexpr char kSentencePieceModuleName[] = "libmcserve_sentencepiece.so";
// The environment variable that names the module's path (overrides the search).
inline constexpr char kSentencePieceModuleEnv[] = "MCSERVE_SENTENCEPIECE_MODULE";

}  // namespace mcserve::engine::internal

// Tokenizer: SentencePiece from a model directory's tokenizer.model (through its own module,
// sentencepiece_loader.h), plus an incremental detokenizer that never splits a UTF-8 character.
// Thread-safe after Load (const methods).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace mcserve::engine {

class Tokenizer {
 public:
  // Loads a SentencePiece model file; InvalidArgument naming the file if unreadable or corrupt;
  // FailedPrecondition naming the paths tried if the SentencePiece module cannot be loaded.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const std::string& path);
  ~Tokenizer();

  // Token ids of `text` (BOS first when add_bos). InvalidArgument if `text` is not valid UTF-8.
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text, bool add_bos) const;
  // Text of `ids` (ids outside the vocabulary → InvalidArgument).
  absl::StatusOr<std::string> Decode(std::span<const int32_t> ids) const;

  // The text `id` adds wherever it follows non-empty decoded text, when that text is fixed (a normal
  // piece or an ASCII byte piece, checked against Decode at load); null for other or bad ids, which
  // only Decode over their neighbours tells.
  const std::string* ContinuationSurface(int32_t id) const;

  int32_t vocab_size() const;
  int32_t bos_id() const;
  int32_t eos_id() const;

  struct Impl;
 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  // At load: keeps the module's continuation surfaces only if Decode agrees with them.
  void CheckContinuationSurfaces();
  std::unique_ptr<Impl> impl_;
};

// Turns a growing list of generated ids into text deltas; holds back bytes of an incomplete
// UTF-8 character until it completes. The concatenated deltas plus Flush() equal Decode(all ids).
// Each Push decodes only a bounded window (the ids since the last fully emitted point plus a few
// ids of left context), so a stream costs O(n), not O(n²); a piece whose text is fixed
// (Tokenizer::ContinuationSurface) after settled text is appended without decoding, the window
// decoded again only when it is due to shrink. One instance per stream; not thread-safe.
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer* tokenizer) : tokenizer_(tokenizer) {}
  // Takes the prompt's last ids as left context before the first Push, so the first generated piece
  // keeps the space SentencePiece drops at the start of a text ("them," + "▁Behold" → " Behold").
  // A prompt ending in an incomplete character leaves no context. Bad ids → InvalidArgument.
  absl::Status SetContext(std::span<const int32_t> prompt_ids);
  // Appends `id` and returns the newly completed text (possibly empty). A bad id → InvalidArgument
  // and the stream is unchanged.
  absl::StatusOr<std::string> Push(int32_t id);
  // Text still held back at the end of the stream (an incomplete character, emitted as is).
  std::string Flush();

 private:
  // Drops all but a few ids of context from window_ once everything decoded so far was emitted.
  void ShrinkWindow(std::string_view window_text);

  const Tokenizer* tokenizer_;
  std::vector<int32_t> window_;  // the last ids of the stream: context + not yet final ones
  size_t emitted_bytes_ = 0;     // bytes of Decode(window_) already handed out (or context)
  bool any_text_ = false;        // the stream's text so far is non-empty
  bool settled_ = true;          // emitted_bytes_ is all of Decode(window_): nothing held back
};

// True if `s` is well-formed UTF-8 (no overlongs, surrogates or code points above U+10FFFF).
bool IsValidUtf8(std::string_view s);

}  // namespace mcserve::engine

// Tokenizer: SentencePiece from a model directory's tokenizer.model, plus an incremental
// detokenizer that never splits a UTF-8 character. Thread-safe after Load (const methods).
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
  // Loads a SentencePiece model file; InvalidArgument naming the file if unreadable or corrupt.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const std::string& path);
  ~Tokenizer();

  // Token ids of `text` (BOS first when add_bos). InvalidArgument if `text` is not valid UTF-8.
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text, bool add_bos) const;
  // Text of `ids` (ids outside the vocabulary → InvalidArgument).
  absl::StatusOr<std::string> Decode(std::span<const int32_t> ids) const;

  int32_t vocab_size() const;
  int32_t bos_id() const;
  int32_t eos_id() const;

  struct Impl;
 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Turns a growing list of generated ids into text deltas; holds back bytes of an incomplete
// UTF-8 character until it completes. One instance per stream; not thread-safe.
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer* tokenizer) : tokenizer_(tokenizer) {}
  // Appends `id` and returns the newly completed text (possibly empty).
  absl::StatusOr<std::string> Push(int32_t id);
  // Text still held back at the end of the stream (an incomplete character, emitted as is).
  std::string Flush();

 private:
  const Tokenizer* tokenizer_;
  std::vector<int32_t> ids_;
  size_t emitted_bytes_ = 0;
};

// True if `s` is well-formed UTF-8 (no overlongs, surrogates or code points above U+10FFFF).
bool IsValidUtf8(std::string_view s);

}  // namespace mcserve::engine

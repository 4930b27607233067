// Thin wrapper around SentencePiece with std-only types. Debian's sentencepiece_processor.h declares
// `absl::string_view` itself, which clashes with Abseil's own, so it is included only by
// sentencepiece_adapter.cc (which includes no Abseil header). Never throws. Const methods are
// thread-safe after Load.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}  // namespace sentencepiece

namespace mcserve::engine::internal {

class SentencePieceAdapter {
 public:
  SentencePieceAdapter();
  ~SentencePieceAdapter();

  // Loads a model file; returns an empty string on success, else the error message.
  std::string Load(const std::string& path);
  // Encodes `text` into `ids`; returns an empty string on success, else the error message.
  std::string Encode(std::string_view text, std::vector<int>* ids) const;
  // Decodes in-vocabulary `ids` into `text`; returns an empty string on success, else the error.
  std::string Decode(const std::vector<int>& ids, std::string* text) const;

  int PieceSize() const;
  int BosId() const;
  int EosId() const;

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
};

}  // namespace mcserve::engine::internal

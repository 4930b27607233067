// No Abseil header may be included here (see sentencepiece_adapter.h).
#include "engine/model/sentencepiece_adapter.h"

#include <exception>

#include "sentencepiece_processor.h"

namespace mcserve::engine::internal {

SentencePieceAdapter::SentencePieceAdapter()
    : processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
SentencePieceAdapter::~SentencePieceAdapter() = default;

std::string SentencePieceAdapter::Load(const std::string& path) {
  try {
    const auto status = processor_->Load(path);
    if (!status.ok()) return status.ToString().empty() ? "unknown error" : status.ToString();
    if (processor_->GetPieceSize() <= 0) return "empty vocabulary";
    return std::string();
  } catch (const std::exception& e) {
    return e.what()[0] != '\0' ? e.what() : "exception";
  } catch (...) {
    return "unknown exception";
  }
}

std::string SentencePieceAdapter::Encode(std::string_view text, std::vector<int>* ids) const {
  try {
    const auto status = processor_->Encode(text, ids);
    return status.ok() ? std::string() : "encode failed: " + status.ToString();
  } catch (const std::exception& e) {
    return std::string("encode failed: ") + e.what();
  } catch (...) {
    return "encode failed: unknown exception";
  }
}

std::string SentencePieceAdapter::Decode(const std::vector<int>& ids, std::string* text) const {
  try {
    const auto status = processor_->Decode(ids, text);
    return status.ok() ? std::string() : "decode failed: " + status.ToString();
  } catch (const std::exception& e) {
    return std::string("decode failed: ") + e.what();
  } catch (...) {
    return "decode failed: unknown exception";
  }
}

int SentencePieceAdapter::PieceSize() const { return processor_->GetPieceSize(); }
int SentencePieceAdapter::BosId() const { return processor_->bos_id(); }
int SentencePieceAdapter::EosId() const { return processor_->eos_id(); }

}  // namespace mcserve::engine::internal

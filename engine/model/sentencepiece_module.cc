// libmcserve_sentencepiece.so: SentencePiece behind SentencePieceModel (sentencepiece_model.h), the
// only code that links libsentencepiece. Not part of mcserve_engine. No Abseil header may be included
// here (Debian's sentencepiece_processor.h declares its own absl::string_view).
#include <exception>
#include <memory>

#include "engine/model/sentencepiece_model.h"
#include "sentencepiece_processor.h"

namespace mcserve::engine::internal {
namespace {

class SentencePieceModelImpl final : public SentencePieceModel {
 public:
  std::string Load(const std::string& path) override {
    try {
      const auto status = processor_.Load(path);
      if (!status.ok()) return status.ToString().empty() ? "unknown error" : status.ToString();
      if (processor_.GetPieceSize() <= 0) return "empty vocabulary";
      return std::string();
    } catch (const std::exception& e) {
      return e.what()[0] != '\0' ? e.what() : "exception";
    } catch (...) {
      return "unknown exception";
    }
  }

  std::string Encode(std::string_view text, std::vector<int>* ids) const override {
    try {
      const auto status = processor_.Encode(text, ids);
      return status.ok() ? std::string() : "encode failed: " + status.ToString();
    } catch (const std::exception& e) {
      return std::string("encode failed: ") + e.what();
    } catch (...) {
      return "encode failed: unknown exception";
    }
  }

  std::string Decode(const std::vector<int>& ids, std::string* text) const override {
    try {
      const auto status = processor_.Decode(ids, text);
      return status.ok() ? std::string() : "decode failed: " + status.ToString();
    } catch (const std::exception& e) {
      return std::string("decode failed: ") + e.what();
    } catch (...) {
      return "decode failed: unknown exception";
    }
  }

  int PieceSize() const override { return processor_.GetPieceSize(); }
  int BosId() const override { return processor_.bos_id(); }
  int EosId() const override { return processor_.eos_id(); }

 private:
  sentencepiece::SentencePieceProcessor processor_;
};

}  // namespace
}  // namespace mcserve::engine::internal

// The module's entry point (kNewSentencePieceModelSymbol).
extern "C" __attribute__((visibility("default"))) mcserve::engine::internal::SentencePieceModel*
mcserve_new_sentencepiece_model(int abi_version) {
  if (abi_version != mcserve::engine::internal::kSentencePieceModuleAbi) return nullptr;
  try {
    return new mcserve::engine::internal::SentencePieceModelImpl();
  } catch (...) {
    return nullptr;
  }
}

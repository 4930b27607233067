// libmcserve_sentencepiece.so: SentencePiece behind SentencePieceModel (sentencepiece_model.h), the
// only code that links libsentencepiece. Not part of mcserve_engine. No Abseil header may be included
// here (Debian's sentencepiece_processor.h declares its own absl::string_view).
#include <cstdlib>
#include <exception>
#include <memory>

#include "engine/model/sentencepiece_model.h"
#include "sentencepiece_processor.h"

namespace mcserve::engine::internal {
namespace {

// `piece` with every "▁" (U+2581, SentencePiece's whitespace symbol) as a space.
std::string ReplaceSpaceSymbol(const std::string& piece) {
  static constexpr char kSpaceSymbol[] = "\xE2\x96\x81";
  std::string out;
  for (size_t i = 0; i < piece.size();) {
    if (piece.compare(i, 3, kSpaceSymbol) == 0) {
      out += ' ';
      i += 3;
    } else {
      out += piece[i++];
    }
  }
  return out;
}

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

  void ContinuationSurfaces(std::vector<std::string>* surface, std::vector<char>* known) const override {
    const int n = processor_.GetPieceSize();
    surface->assign(n, std::string());
    known->assign(n, 0);
    try {
      for (int id = 0; id < n; ++id) {
        if (processor_.IsControl(id) || processor_.IsUnknown(id) || processor_.IsUnused(id)) continue;
        const std::string piece = processor_.IdToPiece(id);
        if (processor_.IsByte(id)) {  // "<0xNN>"
          const unsigned long byte = piece.size() == 6 ? std::strtoul(piece.substr(3, 2).c_str(), nullptr, 16) : 0x80;
          if (byte >= 0x80) continue;
          (*surface)[id] = std::string(1, static_cast<char>(byte));
        } else {
          (*surface)[id] = ReplaceSpaceSymbol(piece);
        }
        (*known)[id] = 1;
      }
    } catch (...) {
      known->assign(n, 0);
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

#include "engine/model/tokenizer.h"

#include <sys/stat.h>

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/model/sentencepiece_loader.h"

namespace mcserve::engine {

struct Tokenizer::Impl {
  std::string path;
  std::unique_ptr<internal::SentencePieceModel> model;  // from the SentencePiece module
  std::vector<std::string> surface;  // [vocab] ContinuationSurface's text, where known
  std::vector<char> known;           // [vocab] whether it is known (all 0 if the check at load failed)
};

namespace {

constexpr size_t kValid = static_cast<size_t>(-1);

// Length of the well-formed UTF-8 sequence starting at s[i], or 0 if it is malformed or truncated.
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // no overlongs
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;  // no overlongs
    if (c == 0xF4) hi = 0x8F;  // ≤ U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  }
  return n;
}

// Byte offset of the first malformed UTF-8 sequence, or kValid.
size_t FirstInvalidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t n = Utf8SequenceLength(s, i);
    if (n == 0) return i;
    i += n;
  }
  return kValid;
}

// Length of `s` without a trailing incomplete UTF-8 character and without trailing U+FFFD
// characters (SentencePiece decodes the bytes of an unfinished byte-fallback character as U+FFFD;
// the next ids may complete it, which changes that text).
size_t StableLength(std::string_view s) {
  size_t end = s.size();
  // Back up over an unfinished multi-byte character (at most 3 bytes).
  for (size_t back = 1; back <= 3 && back <= end; ++back) {
    unsigned char c = static_cast<unsigned char>(s[end - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (need > back) end -= back;
    break;
  }
  constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  while (end >= kReplacement.size() && s.substr(end - kReplacement.size(), kReplacement.size()) == kReplacement) {
    end -= kReplacement.size();
  }
  return end;
}

}  // namespace

bool IsValidUtf8(std::string_view s) { return FirstInvalidUtf8(s) == kValid; }

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Load(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer model ", path, " does not exist or is not a file"));
  }
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  MCSERVE_ASSIGN_OR_RETURN(impl->model, internal::NewSentencePieceModel());
  if (std::string error = impl->model->Load(path); !error.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot load SentencePiece model ", path, ": ", error));
  }
  impl->model->ContinuationSurfaces(&impl->surface, &impl->known);
  auto tokenizer = std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
  tokenizer->CheckContinuationSurfaces();
  return tokenizer;
}

void Tokenizer::CheckContinuationSurfaces() {
  // One Decode of an anchor piece followed by every known id must be the anchor's text followed by
  // their surfaces; otherwise (a model whose decoding does more, e.g. denormalisation rules) no
  // surface is trusted and every Push decodes.
  std::vector<int32_t> ids;
  std::string expected;
  for (size_t id = 0; id < impl_->known.size(); ++id) {
    if (!impl_->known[id]) continue;
    if (ids.empty() && impl_->surface[id].find_first_not_of(' ') == std::string::npos) continue;
    if (!ids.empty()) expected += impl_->surface[id];
    ids.push_back(static_cast<int32_t>(id));
  }
  if (ids.empty()) return;
  absl::StatusOr<std::string> anchor = Decode(std::span<const int32_t>(ids).first(1));
  absl::StatusOr<std::string> all = Decode(ids);
  if (!anchor.ok() || anchor->empty() || !all.ok() || *all != *anchor + expected) {
    impl_->known.assign(impl_->known.size(), 0);
  }
}

const std::string* Tokenizer::ContinuationSurface(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->known.size() || !impl_->known[id]) return nullptr;
  return &impl_->surface[id];
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::Encode(std::string_view text, bool add_bos) const {
  if (size_t bad = FirstInvalidUtf8(text); bad != kValid) {
    return absl::InvalidArgumentError(absl::StrCat("text is not valid UTF-8: malformed byte 0x",
                                                   absl::Hex(static_cast<unsigned char>(text[bad]), absl::kZeroPad2),
                                                   " at byte offset ", bad));
  }
  std::vector<int> ids;
  if (std::string error = impl_->model->Encode(text, &ids); !error.empty()) {
    return absl::InternalError(absl::StrCat("SentencePiece (", impl_->path, "): ", error));
  }
  std::vector<int32_t> out;
  out.reserve(ids.size() + 1);
  if (add_bos) {
    if (bos_id() < 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("tokenizer ", impl_->path, " has no BOS token but add_bos was requested"));
    }
    out.push_back(bos_id());
  }
  out.insert(out.end(), ids.begin(), ids.end());
  return out;
}

absl::StatusOr<std::string> Tokenizer::Decode(std::span<const int32_t> ids) const {
  const int32_t vocab = vocab_size();
  std::vector<int> v;
  v.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat("token id ", ids[i], " at position ", i,
                                                     " is outside the vocabulary [0, ", vocab, ")"));
    }
    v.push_back(ids[i]);
  }
  std::string text;
  if (std::string error = impl_->model->Decode(v, &text); !error.empty()) {
    return absl::InternalError(absl::StrCat("SentencePiece (", impl_->path, "): ", error));
  }
  return text;
}

int32_t Tokenizer::vocab_size() const { return impl_->model->PieceSize(); }
int32_t Tokenizer::bos_id() const { return impl_->model->BosId(); }
int32_t Tokenizer::eos_id() const { return impl_->model->EosId(); }

// Windowed decoding. SentencePiece's Decode drops the leading "▁" of the first piece that is not a
// control piece (BOS/EOS decode to nothing) and decodes each run of byte pieces on its own (a byte
// that does not form a valid character becomes U+FFFD). So for a window = context ids + new ids,
// where the context ends exactly where everything was emitted (no pending partial character) and
// decodes to non-empty text (so it holds a non-control piece), Decode(window) = Decode(context) +
// (the new ids' text in the whole stream): no new piece is the first non-control one, and UTF-8
// decoding resynchronises on every lead byte, so context bytes cut mid-character only change the
// context's own (never re-emitted) text.
namespace {
constexpr size_t kContextIds = 4;   // ids of left context kept when the window shrinks
constexpr size_t kShrinkAt = 16;    // window length that triggers a shrink
}  // namespace

absl::Status IncrementalDetokenizer::SetContext(std::span<const int32_t> prompt_ids) {
  if (!window_.empty() || emitted_bytes_ != 0) {
    return absl::FailedPreconditionError("SetContext must come before the first Push");
  }
  // The fewest trailing ids (from kContextIds up to kShrinkAt) that decode to non-empty, fully
  // stable text: the same condition ShrinkWindow puts on the context it keeps.
  for (size_t n = std::min(kContextIds, prompt_ids.size()); n > 0; n = std::min(2 * n, prompt_ids.size())) {
    const std::span<const int32_t> context = prompt_ids.last(n);
    MCSERVE_ASSIGN_OR_RETURN(std::string text, tokenizer_->Decode(context));
    if (!text.empty() && StableLength(text) == text.size()) {
      window_.assign(context.begin(), context.end());
      emitted_bytes_ = text.size();
      any_text_ = true;
      return absl::OkStatus();
    }
    if (n == prompt_ids.size() || n >= kShrinkAt) break;
  }
  // A prompt that decodes to nothing (control pieces, a lone "▁") is kept whole, as if pushed: its
  // pieces still decide whether the next piece is the text's first.
  MCSERVE_ASSIGN_OR_RETURN(std::string text, tokenizer_->Decode(prompt_ids));
  if (text.empty()) window_.assign(prompt_ids.begin(), prompt_ids.end());
  return absl::OkStatus();
}

absl::StatusOr<std::string> IncrementalDetokenizer::Push(int32_t id) {
  // After settled, non-empty text a fixed piece adds exactly its surface: Decode(window + id) =
  // Decode(window) + surface. The window grows until it is due to shrink, then that Push decodes.
  if (settled_ && any_text_ && window_.size() + 1 < kShrinkAt) {
    if (const std::string* surface = tokenizer_->ContinuationSurface(id)) {
      window_.push_back(id);
      emitted_bytes_ += surface->size();
      return *surface;
    }
  }
  window_.push_back(id);
  absl::StatusOr<std::string> text = tokenizer_->Decode(window_);
  if (!text.ok()) {
    window_.pop_back();
    return text.status();
  }
  const size_t stable = StableLength(*text);
  std::string delta;
  if (stable > emitted_bytes_) {
    delta = text->substr(emitted_bytes_, stable - emitted_bytes_);
    emitted_bytes_ = stable;
    any_text_ = true;
  }
  settled_ = emitted_bytes_ == text->size();
  if (stable == text->size()) ShrinkWindow(*text);
  return delta;
}

void IncrementalDetokenizer::ShrinkWindow(std::string_view window_text) {
  if (!any_text_) {
    // Every id so far decodes to nothing: control pieces (BOS, EOS) plus at most one other piece
    // (a lone "▁", which loses its "▁" as the first non-control piece; a second would be text).
    // Only that piece matters for what follows; a control id c has Decode({c, c}) == "".
    if (window_text.empty() && window_.size() >= kShrinkAt) {
      std::vector<int32_t> kept;
      for (int32_t id : window_) {
        const int32_t twice[2] = {id, id};
        absl::StatusOr<std::string> text = tokenizer_->Decode(twice);
        if (!text.ok() || !text->empty()) kept.push_back(id);
      }
      window_ = std::move(kept);
      emitted_bytes_ = 0;
    }
    return;
  }
  if (window_.size() < kShrinkAt) return;
  std::vector<int32_t> context(window_.end() - kContextIds, window_.end());
  absl::StatusOr<std::string> context_text = tokenizer_->Decode(context);
  // The context must decode to non-empty, fully stable text that ends the window's text.
  if (!context_text.ok() || context_text->empty() || StableLength(*context_text) != context_text->size() ||
      context_text->size() > window_text.size() ||
      window_text.substr(window_text.size() - context_text->size()) != *context_text) {
    return;  // keep the longer window; retried on the next Push
  }
  window_ = std::move(context);
  emitted_bytes_ = context_text->size();
}

std::string IncrementalDetokenizer::Flush() {
  absl::StatusOr<std::string> text = tokenizer_->Decode(window_);
  if (!text.ok() || text->size() <= emitted_bytes_) return std::string();
  std::string rest = text->substr(emitted_bytes_);
  emitted_bytes_ = text->size();
  settled_ = true;
  if (!rest.empty()) any_text_ = true;
  return rest;
}

}  // namespace mcserve::engine

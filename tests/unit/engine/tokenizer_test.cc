#include "engine/model/tokenizer.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/model/safetensors.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/model_test_util.h"

namespace mcserve::engine {
namespace {

using testing::HasError;
using testing::TempDir;
using testing::WriteFile;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

// The committed test tokenizer, or else one trained now with spm_train (byte fallback on).
class TokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string path = std::string(MCSERVE_TEST_DATA_DIR) + "/tokenizer.model";
    if (!std::filesystem::exists(path)) {
      trained_dir_ = new TempDir();
      const std::string prefix = trained_dir_->File("spm");
      const std::string command = "spm_train --input=" + std::string(MCSERVE_TEST_DATA_DIR) +
                                  "/tokenizer_corpus.txt --model_prefix=" + prefix +
                                  " --vocab_size=320 --model_type=bpe --byte_fallback=true"
                                  " --character_coverage=1.0 --hard_vocab_limit=false > /dev/null 2>&1";
      if (std::system(command.c_str()) != 0) return;
      path = prefix + ".model";
    }
    auto loaded = Tokenizer::Load(path);
    if (loaded.ok()) tokenizer_ = loaded->release();
    load_error_ = loaded.ok() ? "" : loaded.status().ToString();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
    delete trained_dir_;
    trained_dir_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(tokenizer_, nullptr) << "no test tokenizer: " << load_error_; }

  std::vector<int32_t> MustEncode(const std::string& text, bool add_bos) {
    auto ids = tokenizer_->Encode(text, add_bos);
    EXPECT_TRUE(ids.ok()) << ids.status();
    return ids.ok() ? *ids : std::vector<int32_t>{};
  }
  std::string MustDecode(const std::vector<int32_t>& ids) {
    auto text = tokenizer_->Decode(ids);
    EXPECT_TRUE(text.ok()) << text.status();
    return text.ok() ? *text : std::string();
  }

  static Tokenizer* tokenizer_;
  static TempDir* trained_dir_;
  static std::string load_error_;
};
Tokenizer* TokenizerTest::tokenizer_ = nullptr;
TempDir* TokenizerTest::trained_dir_ = nullptr;
std::string TokenizerTest::load_error_;

// Text outside the ASCII training corpus: every non-ASCII character goes through byte fallback.
constexpr char kMultiByteText[] = "The caf\xC3\xA9 costs \xE2\x82\xAC" "5 \xF0\x9F\x98\x80 \xE6\x97\xA5\xE6\x9C\xAC ok.";

TEST(TokenizerLoadTest, MissingOrGarbageFileNamesPath) {
  TempDir dir;
  const std::string missing = dir.File("nope.model");
  EXPECT_TRUE(HasError(Tokenizer::Load(missing).status(), kInvalid, {missing}));
  const std::string garbage = dir.File("garbage.model");
  WriteFile(garbage, "this is not a sentencepiece model \x01\x02\x03\xff");
  EXPECT_TRUE(HasError(Tokenizer::Load(garbage).status(), kInvalid, {garbage}));
  const std::string empty = dir.File("empty.model");
  WriteFile(empty, "");
  EXPECT_TRUE(HasError(Tokenizer::Load(empty).status(), kInvalid, {empty}));
  EXPECT_TRUE(HasError(Tokenizer::Load(dir.path()).status(), kInvalid, {dir.path()}));
}

TEST(Utf8Test, IsValidUtf8) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8(kMultiByteText));
  EXPECT_TRUE(IsValidUtf8("\xF4\x8F\xBF\xBF"));      // U+10FFFF
  EXPECT_TRUE(IsValidUtf8("\xEE\x80\x80"));          // U+E000, just past the surrogates
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));     // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));             // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xE0\x80\xAF"));         // overlong
  EXPECT_FALSE(IsValidUtf8("\xF0\x80\x80\xAF"));     // overlong
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));         // surrogate U+D800
  EXPECT_FALSE(IsValidUtf8("\x80"));                 // lone continuation
  EXPECT_FALSE(IsValidUtf8("\xE2\x82"));             // truncated
  EXPECT_FALSE(IsValidUtf8("\xF5\x80\x80\x80"));     // invalid lead
  EXPECT_FALSE(IsValidUtf8(std::string("a\xFF", 2)));
}

TEST_F(TokenizerTest, SpecialIdsAndVocab) {
  EXPECT_GT(tokenizer_->vocab_size(), 256);
  EXPECT_EQ(tokenizer_->bos_id(), 1);
  EXPECT_EQ(tokenizer_->eos_id(), 2);
}

TEST_F(TokenizerTest, EncodeDecodeRoundTrip) {
  const std::string text = "The lighthouse keeper woke before the sun.";
  std::vector<int32_t> ids = MustEncode(text, /*add_bos=*/true);
  ASSERT_GT(ids.size(), 1u);
  EXPECT_EQ(ids[0], tokenizer_->bos_id());
  EXPECT_EQ(MustEncode(text, false), std::vector<int32_t>(ids.begin() + 1, ids.end()));
  EXPECT_EQ(MustDecode(ids), text);
  EXPECT_EQ(MustDecode(MustEncode(kMultiByteText, true)), kMultiByteText);
  EXPECT_TRUE(MustEncode("", false).empty());
}

TEST_F(TokenizerTest, RejectsInvalidUtf8WithOffset) {
  EXPECT_TRUE(HasError(tokenizer_->Encode(std::string("ab\xFF" "cd"), true).status(), kInvalid,
                       {"UTF-8", "byte offset 2"}));
  EXPECT_TRUE(HasError(tokenizer_->Encode("caf\xC3\xA9 \xED\xA0\x80", false).status(), kInvalid,
                       {"UTF-8", "byte offset 6"}));
  EXPECT_TRUE(HasError(tokenizer_->Encode("end\xE2\x82", false).status(), kInvalid, {"byte offset 3"}));
}

TEST_F(TokenizerTest, DecodeRejectsOutOfVocabularyIds) {
  const int32_t vocab = tokenizer_->vocab_size();
  EXPECT_TRUE(HasError(tokenizer_->Decode(std::vector<int32_t>{5, vocab}).status(), kInvalid,
                       {"token id " + std::to_string(vocab), "position 1"}));
  EXPECT_TRUE(HasError(tokenizer_->Decode(std::vector<int32_t>{-1}).status(), kInvalid, {"token id -1"}));
}

// Normal pieces and ASCII byte pieces have a fixed continuation text (what they add after other
// text, "▁" as a space); control pieces, non-ASCII bytes and bad ids have none.
TEST_F(TokenizerTest, ContinuationSurfacesOfPieces) {
  const std::vector<int32_t> hello = MustEncode("hello world", false);  // "▁hello" ... (the dummy prefix)
  std::string joined;
  for (int32_t id : hello) {
    const std::string* surface = tokenizer_->ContinuationSurface(id);
    ASSERT_NE(surface, nullptr) << "piece " << id;
    joined += *surface;
  }
  EXPECT_EQ(joined, " hello world");
  const std::vector<int32_t> a = MustEncode("\x01", false);  // no piece but its byte
  ASSERT_FALSE(a.empty());
  ASSERT_NE(tokenizer_->ContinuationSurface(a.back()), nullptr);
  EXPECT_EQ(*tokenizer_->ContinuationSurface(a.back()), "\x01");
  const std::vector<int32_t> emoji = MustEncode("\xF0\x9F\x98\x80", false);  // "▁", four byte pieces
  ASSERT_GE(emoji.size(), 4u);
  for (size_t i = emoji.size() - 4; i < emoji.size(); ++i) EXPECT_EQ(tokenizer_->ContinuationSurface(emoji[i]), nullptr);
  EXPECT_EQ(tokenizer_->ContinuationSurface(tokenizer_->bos_id()), nullptr);
  EXPECT_EQ(tokenizer_->ContinuationSurface(tokenizer_->eos_id()), nullptr);
  EXPECT_EQ(tokenizer_->ContinuationSurface(-1), nullptr);
  EXPECT_EQ(tokenizer_->ContinuationSurface(tokenizer_->vocab_size()), nullptr);
}

// Pushes ids one at a time; every delta is valid UTF-8 and the deltas concatenate to Decode(ids).
void ExpectIncrementalMatchesFull(const Tokenizer& tokenizer, const std::vector<int32_t>& ids,
                                  int* empty_deltas = nullptr) {
  IncrementalDetokenizer detok(&tokenizer);
  std::string streamed;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto delta = detok.Push(ids[i]);
    ASSERT_TRUE(delta.ok()) << delta.status();
    EXPECT_TRUE(IsValidUtf8(*delta)) << "delta " << i;
    EXPECT_EQ(delta->find("\xEF\xBF\xBD"), std::string::npos) << "delta " << i << " has U+FFFD";
    if (delta->empty() && empty_deltas != nullptr) ++*empty_deltas;
    streamed += *delta;
  }
  streamed += detok.Flush();
  auto full = tokenizer.Decode(ids);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(streamed, *full);
}

TEST_F(TokenizerTest, IncrementalDetokenizerOnByteFallbackCharacters) {
  std::vector<int32_t> ids = MustEncode(kMultiByteText, /*add_bos=*/true);
  // The 4-byte emoji alone needs 4 byte-fallback pieces, so there are more ids than characters.
  std::vector<int32_t> emoji = MustEncode("\xF0\x9F\x98\x80", false);
  ASSERT_GE(emoji.size(), 4u) << "test tokenizer has no byte fallback for the emoji";
  int empty_deltas = 0;
  ExpectIncrementalMatchesFull(*tokenizer_, ids, &empty_deltas);
  EXPECT_GE(empty_deltas, 3) << "partial characters must be held back";
  ExpectIncrementalMatchesFull(*tokenizer_, MustEncode("  leading spaces and\ttabs  ", false));
  ExpectIncrementalMatchesFull(*tokenizer_, MustEncode("\xE2\x82\xAC\xE2\x82\xAC at the start", false));
}

TEST_F(TokenizerTest, IncrementalDetokenizerHoldsBackThenFlushes) {
  std::vector<int32_t> euro = MustEncode("\xE2\x82\xAC", false);
  ASSERT_GE(euro.size(), 3u);
  std::vector<int32_t> partial(euro.end() - 3, euro.end() - 1);  // the first two byte pieces
  IncrementalDetokenizer detok(tokenizer_);
  std::string streamed;
  for (int32_t id : partial) {
    auto delta = detok.Push(id);
    ASSERT_TRUE(delta.ok()) << delta.status();
    streamed += *delta;
  }
  EXPECT_EQ(streamed.find("\xEF\xBF\xBD"), std::string::npos);
  // The stream ends mid-character: Flush hands over whatever Decode makes of the bytes.
  streamed += detok.Flush();
  EXPECT_EQ(streamed, MustDecode(std::vector<int32_t>(euro.begin(), euro.end() - 1)));
  EXPECT_EQ(detok.Flush(), "");
}

TEST_F(TokenizerTest, IncrementalDetokenizerRejectsBadIdAndContinues) {
  IncrementalDetokenizer detok(tokenizer_);
  std::vector<int32_t> ids = MustEncode("Hello world", true);
  std::string streamed;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i == 2) {
      EXPECT_TRUE(HasError(detok.Push(tokenizer_->vocab_size() + 7).status(), kInvalid, {"token id"}));
    }
    auto delta = detok.Push(ids[i]);
    ASSERT_TRUE(delta.ok()) << delta.status();
    streamed += *delta;
  }
  streamed += detok.Flush();
  EXPECT_EQ(streamed, "Hello world");
}

// The prompt ids the reference recorded in every fixture's golden.safetensors.
TEST_F(TokenizerTest, MatchesReferencePromptIds) {
  const std::string golden = std::string(MCSERVE_TEST_DATA_DIR) + "/models/gla/golden.safetensors";
  if (!std::filesystem::exists(golden) ||
      !std::filesystem::exists(std::string(MCSERVE_TEST_DATA_DIR) + "/tokenizer.model")) {
    GTEST_SKIP() << "reference fixtures not present";
  }
  auto file = SafetensorsFile::Open(golden);
  ASSERT_TRUE(file.ok()) << file.status();
  const SafetensorsEntry* entry = (*file)->Find("prompt_ids");
  ASSERT_NE(entry, nullptr);
  ASSERT_EQ(entry->dtype, kernels::DType::kI32);
  std::vector<int32_t> expected(static_cast<size_t>(entry->shape.at(0)));
  std::memcpy(expected.data(), (*file)->DataOf(*entry), expected.size() * sizeof(int32_t));
  EXPECT_EQ(MustEncode("The cat watched 3 gulls from the window sill.", true), expected);
}

// Random streams mixing uniform ids (control tokens, lone and invalid byte pieces, "▁" pieces) with
// the ids of multi-byte text (byte-fallback pieces that form 2-4 byte characters).
std::vector<int32_t> RandomStream(const Tokenizer& tokenizer, size_t n, uint64_t seed) {
  static const char* const kChunks[] = {"caf\xC3\xA9", " \xE2\x82\xAC", "\xF0\x9F\x98\x80", " \xE6\x97\xA5\xE6\x9C\xAC",
                                        "  two  spaces", "\xC3\xA9\xC3\xA9", " the sun", "\xD0\x96x", "\n\t"};
  std::mt19937_64 rng(seed);
  std::vector<int32_t> ids;
  while (ids.size() < n) {
    const int kind = static_cast<int>(rng() % 4);
    if (kind == 0) {
      ids.push_back(static_cast<int32_t>(rng() % tokenizer.vocab_size()));
    } else {
      auto chunk = tokenizer.Encode(kChunks[rng() % std::size(kChunks)], /*add_bos=*/false);
      if (chunk.ok()) ids.insert(ids.end(), chunk->begin(), chunk->end());
    }
  }
  ids.resize(n);
  return ids;
}

// Streams `ids`; every delta is valid UTF-8 and, when `check_prefixes`, the text so far is a prefix
// of Decode(ids pushed so far) after every step. The deltas plus Flush equal Decode(all ids).
void ExpectStreamMatchesDecode(const Tokenizer& tokenizer, const std::vector<int32_t>& ids, bool check_prefixes) {
  IncrementalDetokenizer detok(&tokenizer);
  std::string streamed;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto delta = detok.Push(ids[i]);
    ASSERT_TRUE(delta.ok()) << delta.status();
    ASSERT_TRUE(IsValidUtf8(*delta)) << "delta " << i;
    streamed += *delta;
    if (check_prefixes) {
      auto so_far = tokenizer.Decode(std::span<const int32_t>(ids.data(), i + 1));
      ASSERT_TRUE(so_far.ok());
      ASSERT_EQ(so_far->compare(0, streamed.size(), streamed), 0) << "step " << i;
    }
  }
  streamed += detok.Flush();
  auto full = tokenizer.Decode(ids);
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_EQ(streamed, *full);
}

// The fixtures' tokenizers plus a unigram model trained now (a different piece inventory: a lone
// "▁" piece, split digits), each against Decode(all ids) on long random streams.
TEST_F(TokenizerTest, IncrementalDetokenizerMatchesDecodeOnLongRandomStreams) {
  std::vector<std::unique_ptr<Tokenizer>> owned;
  std::vector<const Tokenizer*> tokenizers = {tokenizer_};
  for (const std::string path : {std::string(MCSERVE_SOURCE_DIR) + "/models/mcserve-tiny/tokenizer.model",
                                 std::string(MCSERVE_TEST_DATA_DIR) + "/models/gla/tokenizer.model",
                                 std::string(MCSERVE_TEST_DATA_DIR) + "/models/titans/tokenizer.model"}) {
    if (!std::filesystem::exists(path)) continue;
    auto loaded = Tokenizer::Load(path);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    owned.push_back(std::move(*loaded));
    tokenizers.push_back(owned.back().get());
  }
  TempDir dir;
  const std::string command = "spm_train --input=" + std::string(MCSERVE_TEST_DATA_DIR) +
                              "/tokenizer_corpus.txt --model_prefix=" + dir.File("uni") +
                              " --vocab_size=400 --model_type=unigram --byte_fallback=true --split_digits=true"
                              " --character_coverage=1.0 --hard_vocab_limit=false > /dev/null 2>&1";
  if (std::system(command.c_str()) == 0) {
    auto loaded = Tokenizer::Load(dir.File("uni.model"));
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    owned.push_back(std::move(*loaded));
    tokenizers.push_back(owned.back().get());
  }
  for (size_t t = 0; t < tokenizers.size(); ++t) {
    SCOPED_TRACE("tokenizer " + std::to_string(t));
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      ExpectStreamMatchesDecode(*tokenizers[t], RandomStream(*tokenizers[t], 600, seed), /*check_prefixes=*/true);
    }
    ExpectStreamMatchesDecode(*tokenizers[t], RandomStream(*tokenizers[t], 30000, 99), /*check_prefixes=*/false);
    // Leading-space rule across ids that decode to nothing (BOS, EOS) and a lone space piece.
    const int32_t bos = tokenizers[t]->bos_id(), eos = tokenizers[t]->eos_id();
    auto hello = tokenizers[t]->Encode(" hello world", false);
    ASSERT_TRUE(hello.ok());
    for (const std::vector<int32_t>& prefix :
         {std::vector<int32_t>{bos}, std::vector<int32_t>{eos, eos, bos}, std::vector<int32_t>(20, eos)}) {
      std::vector<int32_t> ids = prefix;
      for (int rep = 0; rep < 8; ++rep) {
        ids.insert(ids.end(), hello->begin(), hello->end());
        ids.insert(ids.end(), 5, eos);
      }
      ExpectStreamMatchesDecode(*tokenizers[t], ids, /*check_prefixes=*/true);
    }
  }
}

// With the prompt as context, the streamed continuation is exactly what Decode(prompt + generated)
// adds to Decode(prompt) — the first piece keeps its leading space — wherever the prompt's text is
// stable and a prefix of the whole (a prompt ending mid-character has no stable context).
TEST_F(TokenizerTest, IncrementalDetokenizerWithPromptContextContinuesThePromptText) {
  const std::vector<int32_t> ids = RandomStream(*tokenizer_, 400, 5);
  int checked = 0;
  for (size_t split = 1; split < ids.size(); split += 3) {
    const std::span<const int32_t> prompt(ids.data(), split);
    IncrementalDetokenizer detok(tokenizer_);
    ASSERT_TRUE(detok.SetContext(prompt).ok());
    std::string streamed;
    for (size_t i = split; i < ids.size(); ++i) {
      auto delta = detok.Push(ids[i]);
      ASSERT_TRUE(delta.ok()) << delta.status();
      ASSERT_TRUE(IsValidUtf8(*delta)) << "split " << split << " delta " << i;
      streamed += *delta;
    }
    streamed += detok.Flush();
    const std::string head = MustDecode(std::vector<int32_t>(prompt.begin(), prompt.end()));
    const std::string whole = MustDecode(ids);
    if (head.find("\xEF\xBF\xBD") != std::string::npos || whole.compare(0, head.size(), head) != 0) continue;
    EXPECT_EQ(streamed, whole.substr(head.size())) << "split " << split;
    ++checked;
  }
  EXPECT_GE(checked, 20);
}

TEST_F(TokenizerTest, IncrementalDetokenizerContextKeepsTheFirstPiecesSpace) {
  const std::vector<int32_t> prompt = MustEncode("Hello world", true);
  const std::vector<int32_t> more = MustEncode("the sun", false);  // "▁the▁sun"
  IncrementalDetokenizer with_context(tokenizer_), without(tokenizer_);
  ASSERT_TRUE(with_context.SetContext(prompt).ok());
  std::string a, b;
  for (int32_t id : more) {
    a += *with_context.Push(id);
    b += *without.Push(id);
  }
  EXPECT_EQ(a + with_context.Flush(), " the sun");
  EXPECT_EQ(b + without.Flush(), "the sun");  // no context: SentencePiece's start-of-text rule
  // Only BOS: nothing to continue, so the start-of-text rule applies.
  IncrementalDetokenizer after_bos(tokenizer_);
  ASSERT_TRUE(after_bos.SetContext(std::vector<int32_t>{tokenizer_->bos_id()}).ok());
  std::string c;
  for (int32_t id : more) c += *after_bos.Push(id);
  EXPECT_EQ(c + after_bos.Flush(), "the sun");
}

TEST_F(TokenizerTest, IncrementalDetokenizerContextErrors) {
  IncrementalDetokenizer detok(tokenizer_);
  EXPECT_TRUE(HasError(detok.SetContext(std::vector<int32_t>{5, tokenizer_->vocab_size()}), kInvalid, {"token id"}));
  ASSERT_TRUE(detok.Push(MustEncode("Hello", false).front()).ok());
  EXPECT_EQ(detok.SetContext(MustEncode("Hello", true)).code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace mcserve::engine

#include "engine/sampling/output_stream.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace mcserve::engine {
namespace {

constexpr char kText[] = "The lighthouse keeper woke before the sun.";
constexpr char kMultiByte[] = "The caf\xC3\xA9 costs \xE2\x82\xAC" "5 today.";  // é and € via byte fallback

class OutputStreamTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto loaded = Tokenizer::Load(std::string(MCSERVE_TEST_DATA_DIR) + "/tokenizer.model");
    if (loaded.ok()) tokenizer_ = loaded->release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(tokenizer_, nullptr) << "tests/data/tokenizer.model missing"; }

  std::vector<int32_t> Ids(const std::string& text) {
    auto ids = tokenizer_->Encode(text, /*add_bos=*/false);
    EXPECT_TRUE(ids.ok()) << ids.status();
    return ids.ok() ? *ids : std::vector<int32_t>{};
  }
  OutputStream Make(StopCriteria criteria) {
    auto s = OutputStream::Create(tokenizer_, std::move(criteria), tokenizer_->eos_id());
    EXPECT_TRUE(s.ok()) << s.status();
    return std::move(*s);
  }

  struct Result {
    std::string text;                 // all deltas concatenated
    OutputStream::Delta last;         // the finishing delta (finish == kNone if ids ran out)
    int pushed = 0;                   // ids consumed until the finish
    std::vector<std::string> deltas;
  };
  // Pushes ids until the stream finishes; every delta must be valid UTF-8.
  Result Run(OutputStream& stream, const std::vector<int32_t>& ids) {
    Result r;
    for (int32_t id : ids) {
      auto d = stream.Push(id);
      EXPECT_TRUE(d.ok()) << d.status();
      if (!d.ok()) break;
      EXPECT_TRUE(IsValidUtf8(d->text)) << "delta after id " << r.pushed;
      r.text += d->text;
      r.deltas.push_back(d->text);
      ++r.pushed;
      if (d->finish != FinishReason::kNone) {
        r.last = *d;
        break;
      }
    }
    return r;
  }
  std::string Decode(const std::vector<int32_t>& ids) {
    auto t = tokenizer_->Decode(ids);
    EXPECT_TRUE(t.ok());
    return t.ok() ? *t : "";
  }

  static Tokenizer* tokenizer_;
};
Tokenizer* OutputStreamTest::tokenizer_ = nullptr;

TEST(FinishReasonTest, Names) {
  EXPECT_STREQ(FinishReasonName(FinishReason::kNone), "");
  EXPECT_STREQ(FinishReasonName(FinishReason::kLength), "length");
  EXPECT_STREQ(FinishReasonName(FinishReason::kStop), "stop");
  EXPECT_STREQ(FinishReasonName(FinishReason::kCancelled), "cancelled");
  EXPECT_STREQ(FinishReasonName(FinishReason::kError), "error");
}

TEST_F(OutputStreamTest, MaxTokensEndsWithLengthAndAllText) {
  const std::vector<int32_t> ids = Ids(kMultiByte);
  OutputStream s = Make({.max_tokens = static_cast<int>(ids.size())});
  Result r = Run(s, ids);
  EXPECT_EQ(r.last.finish, FinishReason::kLength);
  EXPECT_EQ(r.pushed, static_cast<int>(ids.size()));
  EXPECT_EQ(r.text, kMultiByte);
  EXPECT_EQ(s.generated(), static_cast<int>(ids.size()));
  EXPECT_EQ(s.Push(ids[0]).status().code(), absl::StatusCode::kFailedPrecondition);

  OutputStream short_stream = Make({.max_tokens = 3});
  Result r3 = Run(short_stream, ids);
  EXPECT_EQ(r3.pushed, 3);
  EXPECT_EQ(r3.last.finish, FinishReason::kLength);
  EXPECT_EQ(r3.text, Decode({ids.begin(), ids.begin() + 3}));
}

TEST_F(OutputStreamTest, StopStringSpanningTokensCutsBeforeTheMatch) {
  const std::vector<int32_t> ids = Ids(kText);
  ASSERT_GE(Ids(" keeper").size(), 2u);
  for (const std::string& stop : {std::string("keeper"), std::string("er wo"), std::string("sun.")}) {
    OutputStream s = Make({.max_tokens = 100, .stop_strings = {stop}});
    Result r = Run(s, ids);
    const std::string full = kText;
    EXPECT_EQ(r.last.finish, FinishReason::kStop) << stop;
    EXPECT_EQ(r.last.stop, stop);
    EXPECT_FALSE(r.last.stop_token.has_value());
    EXPECT_EQ(r.text, full.substr(0, full.find(stop))) << stop;
    // The stream ended on the id that completed the match.
    EXPECT_EQ(Decode({ids.begin(), ids.begin() + r.pushed}).find(stop) + stop.size(),
              Decode({ids.begin(), ids.begin() + r.pushed}).size()) << stop;
  }
}

TEST_F(OutputStreamTest, IncludeStopStringKeepsTheMatch) {
  OutputStream s = Make({.max_tokens = 100, .stop_strings = {"keep"}, .include_stop_string = true});
  Result r = Run(s, Ids(kText));
  EXPECT_EQ(r.last.finish, FinishReason::kStop);
  EXPECT_EQ(r.text, "The lighthouse keep");
  // Text after the match in the same token is dropped: "er" is one piece; stop at its "e".
  OutputStream t = Make({.max_tokens = 100, .stop_strings = {"keepe"}, .include_stop_string = true});
  Result rt = Run(t, Ids(kText));
  EXPECT_EQ(rt.text, "The lighthouse keepe");
}

TEST_F(OutputStreamTest, UnfinishedStopPrefixIsHeldThenReleased) {
  const std::vector<int32_t> ids = Ids(kText);
  // "sun!" never completes: "sun" is held back until "." shows it is not a stop string.
  OutputStream s = Make({.max_tokens = 100, .stop_strings = {"sun!", "lighthouse keeper slept"}});
  std::string streamed;
  bool held_sun = false;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto d = s.Push(ids[i]);
    ASSERT_TRUE(d.ok());
    ASSERT_EQ(d->finish, FinishReason::kNone);
    streamed += d->text;
    const std::string decoded = Decode({ids.begin(), ids.begin() + i + 1});
    ASSERT_EQ(decoded.compare(0, streamed.size(), streamed), 0);
    if (decoded.size() >= 3 && decoded.substr(decoded.size() - 3) == "sun") {
      held_sun = true;
      EXPECT_EQ(streamed, decoded.substr(0, decoded.size() - 3));
    }
    // While "lighthouse keeper" could still become the second stop string, it stays held back.
    if (decoded == "The lighthouse keeper") EXPECT_EQ(streamed, "The ");
  }
  EXPECT_TRUE(held_sun);
  EXPECT_EQ(streamed, kText);  // "." showed that "sun" is not "sun!": released before the end
  // The stream ends by length: everything held back comes out.
  OutputStream t = Make({.max_tokens = static_cast<int>(ids.size()), .stop_strings = {"sun!"}});
  Result r = Run(t, ids);
  EXPECT_EQ(r.last.finish, FinishReason::kLength);
  EXPECT_EQ(r.text, kText);
  OutputStream u = Make({.max_tokens = static_cast<int>(ids.size()), .stop_strings = {"sun.!"}});
  EXPECT_EQ(Run(u, ids).text, kText);  // the held-back "sun." is released at the end
}

TEST_F(OutputStreamTest, OverlappingCandidatesFirstCompletedWins) {
  const std::vector<int32_t> ids = Ids(kText);
  // "before the moon" shares "before the " with the text and never completes; "the sun" does.
  OutputStream s = Make({.max_tokens = 100, .stop_strings = {"before the moon", "the sun"}});
  Result r = Run(s, ids);
  EXPECT_EQ(r.last.finish, FinishReason::kStop);
  EXPECT_EQ(r.last.stop, "the sun");
  EXPECT_EQ(r.text, "The lighthouse keeper woke before ");
  // Two candidates completed by the same token ("." ends both): the earlier match wins.
  OutputStream t = Make({.max_tokens = 100, .stop_strings = {"n.", "the sun."}});
  Result rt = Run(t, ids);
  EXPECT_EQ(rt.last.stop, "the sun.");
  EXPECT_EQ(rt.text, "The lighthouse keeper woke before ");
  // Overlapping occurrences of one stop string ("ee" in "keeper").
  OutputStream u = Make({.max_tokens = 100, .stop_strings = {"eep", "ke"}});
  Result ru = Run(u, ids);
  EXPECT_EQ(ru.last.stop, "ke");
  EXPECT_EQ(ru.text, "The lighthouse ");
}

TEST_F(OutputStreamTest, StopStringInsideMultiByteCharacters) {
  const std::vector<int32_t> ids = Ids(kMultiByte);
  ASSERT_GE(Ids("\xE2\x82\xAC").size(), 3u) << "expected byte-fallback pieces for the euro sign";
  for (bool include : {false, true}) {
    OutputStream s = Make({.max_tokens = 100, .stop_strings = {"\xE2\x82\xAC" "5"}, .include_stop_string = include});
    Result r = Run(s, ids);
    EXPECT_EQ(r.last.finish, FinishReason::kStop);
    EXPECT_EQ(r.text, include ? "The caf\xC3\xA9 costs \xE2\x82\xAC" "5" : "The caf\xC3\xA9 costs ");
  }
  // A stop string that is one character made of two byte pieces.
  OutputStream s = Make({.max_tokens = 100, .stop_strings = {"\xC3\xA9"}});
  Result r = Run(s, ids);
  EXPECT_EQ(r.text, "The caf");
  // A stop string ending with the first byte-piece character's bytes never matches mid-character
  // ("é c" completes only after " c").
  OutputStream t = Make({.max_tokens = 100, .stop_strings = {"\xC3\xA9 c"}});
  Result rt = Run(t, ids);
  EXPECT_EQ(rt.text, "The caf");
  EXPECT_EQ(rt.last.stop, "\xC3\xA9 c");
}

TEST_F(OutputStreamTest, StopTokenIdsAndEos) {
  const std::vector<int32_t> ids = Ids(kText);
  const int32_t stop_id = ids[5];
  OutputStream s = Make({.max_tokens = 100, .stop_token_ids = {stop_id}});
  Result r = Run(s, ids);
  EXPECT_EQ(r.last.finish, FinishReason::kStop);
  EXPECT_EQ(r.last.stop, "");
  EXPECT_EQ(r.last.stop_token, stop_id);
  const auto first = std::find(ids.begin(), ids.end(), stop_id);
  EXPECT_EQ(r.pushed, first - ids.begin() + 1);
  EXPECT_EQ(r.text, Decode({ids.begin(), first}));  // the stop id's text is left out
  OutputStream inc = Make({.max_tokens = 100, .stop_token_ids = {stop_id}, .include_stop_string = true});
  EXPECT_EQ(Run(inc, ids).text, Decode({ids.begin(), first + 1}));

  std::vector<int32_t> with_eos(ids.begin(), ids.begin() + 4);
  with_eos.push_back(tokenizer_->eos_id());
  with_eos.insert(with_eos.end(), ids.begin() + 4, ids.end());
  OutputStream e = Make({.max_tokens = 100});
  Result re = Run(e, with_eos);
  EXPECT_EQ(re.last.finish, FinishReason::kStop);
  EXPECT_EQ(re.last.stop_token, tokenizer_->eos_id());
  EXPECT_EQ(re.pushed, 5);
  EXPECT_EQ(re.text, Decode({ids.begin(), ids.begin() + 4}));
  // ignore_eos: EOS is just another (empty) token; the stream runs to max_tokens.
  OutputStream ig = Make({.max_tokens = static_cast<int>(with_eos.size()), .ignore_eos = true});
  Result ri = Run(ig, with_eos);
  EXPECT_EQ(ri.last.finish, FinishReason::kLength);
  EXPECT_EQ(ri.text, kText);
}

TEST_F(OutputStreamTest, MinTokensBansEosAndStopIdsAndDefersStopStrings) {
  const int32_t eos = tokenizer_->eos_id();
  OutputStream s = Make({.max_tokens = 10, .min_tokens = 2, .stop_token_ids = {7, eos}});
  EXPECT_EQ(s.BannedIds(), (std::vector<int32_t>{eos, 7}));
  ASSERT_TRUE(s.Push(20).ok());
  EXPECT_EQ(s.BannedIds(), (std::vector<int32_t>{eos, 7}));
  ASSERT_TRUE(s.Push(21).ok());
  EXPECT_TRUE(s.BannedIds().empty());
  auto d = s.Push(eos);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->finish, FinishReason::kStop);

  OutputStream ig = Make({.max_tokens = 10, .min_tokens = 1, .ignore_eos = true});
  EXPECT_TRUE(ig.BannedIds().empty());
  OutputStream none = Make({.max_tokens = 10});
  EXPECT_TRUE(none.BannedIds().empty());

  // An EOS pushed anyway below min_tokens does not end the stream (vLLM checks nothing before).
  OutputStream early = Make({.max_tokens = 10, .min_tokens = 3});
  auto e = early.Push(eos);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->finish, FinishReason::kNone);

  // Stop strings only match in text of ids after the first min_tokens (vLLM's rule): "e" in
  // "The" (ids 1-3) is ignored, the next "e" stops.
  const std::vector<int32_t> ids = Ids(kText);
  OutputStream m = Make({.max_tokens = 100, .min_tokens = 3, .stop_strings = {"e"}});
  Result r = Run(m, ids);
  EXPECT_EQ(r.last.stop, "e");
  EXPECT_EQ(r.text, "The lighthous");
  OutputStream m0 = Make({.max_tokens = 100, .stop_strings = {"e"}});
  EXPECT_EQ(Run(m0, ids).text, "Th");
}

TEST_F(OutputStreamTest, InvalidCriteria) {
  const auto invalid = [&](StopCriteria c, const std::string& name) {
    auto s = OutputStream::Create(tokenizer_, std::move(c), tokenizer_->eos_id());
    ASSERT_FALSE(s.ok()) << name;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(name), std::string::npos) << s.status();
  };
  invalid({.max_tokens = 0}, "max_tokens");
  invalid({.max_tokens = 4, .min_tokens = 5}, "min_tokens");
  invalid({.max_tokens = 4, .min_tokens = -1}, "min_tokens");
  invalid({.max_tokens = 4, .stop_strings = {"ok", ""}}, "stop_strings[1]");
  invalid({.max_tokens = 4, .stop_strings = {"\xC3"}}, "stop_strings[0]");
  invalid({.max_tokens = 4, .stop_token_ids = {-3}}, "stop_token_ids");
  EXPECT_FALSE(OutputStream::Create(nullptr, {}, 2).ok());
  EXPECT_TRUE(OutputStream::Create(tokenizer_, {.max_tokens = 1, .min_tokens = 1}, 2).ok());
}

TEST_F(OutputStreamTest, BadIdIsAnErrorAndTheStreamContinues) {
  OutputStream s = Make({.max_tokens = 5});
  EXPECT_EQ(s.Push(tokenizer_->vocab_size() + 3).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.generated(), 0);
  const std::vector<int32_t> ids = Ids("Hello");
  Result r = Run(s, ids);
  EXPECT_EQ(r.text, Decode(ids).substr(0, r.text.size()));
}

}  // namespace
}  // namespace mcserve::engine

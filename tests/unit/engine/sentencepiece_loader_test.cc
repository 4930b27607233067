// The SentencePiece module: where it is looked for, the errors when it cannot be loaded, and that
// SentencePiece (and its bundled protobuf-lite) stays out of the process's global symbol scope.
#include "engine/model/sentencepiece_loader.h"

#include <dlfcn.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "engine/model/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/model_test_util.h"

namespace mcserve::engine::internal {
namespace {

TEST(SentencePieceLoaderTest, TheEnvironmentVariableAloneOverridesTheSearch) {
  unsetenv(kSentencePieceModuleEnv);
  const std::vector<std::string> searched = SentencePieceModuleCandidates();
  ASSERT_GE(searched.size(), 3u);  // next to the binary, ../lib/mcserve/, the build tree
  for (const std::string& path : searched) {
    EXPECT_EQ(path.substr(path.rfind('/') + 1), kSentencePieceModuleName) << path;
  }
  EXPECT_NE(searched[1].find("/../lib/mcserve/"), std::string::npos) << searched[1];
  setenv(kSentencePieceModuleEnv, "/opt/elsewhere/libspm.so", 1);
  EXPECT_EQ(SentencePieceModuleCandidates(), std::vector<std::string>{"/opt/elsewhere/libspm.so"});
  unsetenv(kSentencePieceModuleEnv);
}

TEST(SentencePieceLoaderTest, AMissingModuleNamesEveryPathTried) {
  auto opened = OpenSentencePieceModule({"/nonexistent/a/libmcserve_sentencepiece.so", "/nonexistent/b/libx.so"});
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(opened.status().message());
  EXPECT_NE(message.find("/nonexistent/a/libmcserve_sentencepiece.so (not found)"), std::string::npos) << message;
  EXPECT_NE(message.find("/nonexistent/b/libx.so (not found)"), std::string::npos) << message;
  EXPECT_NE(message.find(kSentencePieceModuleEnv), std::string::npos) << message;
}

TEST(SentencePieceLoaderTest, AFileThatIsNotTheModuleSaysWhy) {
  testing::TempDir dir;
  const std::string not_a_library = dir.File("libmcserve_sentencepiece.so");
  testing::WriteFile(not_a_library, "not an ELF file");
  auto opened = OpenSentencePieceModule({not_a_library});
  ASSERT_FALSE(opened.ok());
  const std::string message(opened.status().message());
  EXPECT_NE(message.find(not_a_library + " ("), std::string::npos) << message;
  EXPECT_EQ(message.find("(not found)"), std::string::npos) << message;
  // A real shared library without the entry point.
  auto libc = OpenSentencePieceModule({"/lib/x86_64-linux-gnu/libm.so.6"});
  if (!libc.ok()) {
    EXPECT_NE(libc.status().message().find(std::string("no symbol ") + kNewSentencePieceModelSymbol), std::string::npos)
        << libc.status();
  }
}

TEST(SentencePieceLoaderTest, TheBuiltModuleLoadsAndKeepsSentencePieceOutOfTheGlobalScope) {
  auto tokenizer = Tokenizer::Load(std::string(MCSERVE_TEST_DATA_DIR) + "/tokenizer.model");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto ids = (*tokenizer)->Encode("In the beginning", /*add_bos=*/false);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_FALSE(ids->empty());
  // Loaded RTLD_LOCAL: neither SentencePiece's nor its bundled protobuf-lite's symbols are global.
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "_ZN13sentencepiece22SentencePieceProcessorC1Ev"), nullptr);
  EXPECT_EQ(dlsym(RTLD_DEFAULT, kNewSentencePieceModelSymbol), nullptr);
  // A model from the module speaks this build's interface version only.
  auto opened = OpenSentencePieceModule(SentencePieceModuleCandidates());
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ((*opened)(kSentencePieceModuleAbi + 1), nullptr);
  SentencePieceModel* model = (*opened)(kSentencePieceModuleAbi);
  ASSERT_NE(model, nullptr);
  delete model;
}

}  // namespace
}  // namespace mcserve::engine::internal

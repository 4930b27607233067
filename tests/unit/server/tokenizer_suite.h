// TokenizerSuite: a gtest fixture base for the front-end tests that need a real tokenizer; it loads
// the gated_deltanet fixture's tokenizer.model once per test suite into `tokenizer_`. Test thread only.
#pragma once

#include <string>

#include "engine/model/tokenizer.h"
#include "gtest/gtest.h"

namespace mcserve::server {

class TokenizerSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto tokenizer =
        engine::Tokenizer::Load(std::string(MCSERVE_TEST_DATA_DIR) + "/models/gated_deltanet/tokenizer.model");
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = std::move(*tokenizer).release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }

  static inline engine::Tokenizer* tokenizer_ = nullptr;
};

}  // namespace mcserve::server

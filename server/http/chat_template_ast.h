// The parsed form of a ChatTemplate (chat_template.h): expression and statement trees. Internal to
// chat_template.cc (parsing) and chat_template_render.cc (rendering); plain values.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"

namespace mcserve::server::chat_template_internal {

// An expression. `name` is the variable, attribute, operator, filter, test or function name.
struct Expr {
  enum class Kind { kLiteral, kName, kAttr, kIndex, kBinary, kNot, kFilter, kTest, kCall };
  Kind kind = Kind::kLiteral;
  nlohmann::json literal;
  std::string name;
  bool negated = false;                      // kTest: `is not`
  std::vector<std::unique_ptr<Expr>> args;   // operands (kAttr/kFilter/kTest: the subject first)
};

// A statement: literal text, an output {{ }}, a for loop, an if chain or a set.
struct Node {
  enum class Kind { kText, kOutput, kFor, kIf, kSet };
  Kind kind = Kind::kText;
  std::string text;                // kText: the text; kFor / kSet: the variable
  std::unique_ptr<Expr> expr;      // kOutput / kSet: the value; kFor: the sequence
  std::vector<Node> body;          // kFor
  // kIf: (condition, body) per branch; a null condition is the else branch.
  std::vector<std::pair<std::unique_ptr<Expr>, std::vector<Node>>> branches;
};

}  // namespace mcserve::server::chat_template_internal

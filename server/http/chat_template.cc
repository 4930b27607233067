// ChatTemplate parsing: the template text into segments (text, {{ }}, {% %}) with Jinja's whitespace
// rules, each tag's expression into tokens, and those into the trees of chat_template_ast.h.
#include "server/http/chat_template.h"

#include <cctype>

#include "absl/strings/str_cat.h"
#include "server/http/chat_template_ast.h"

namespace mcserve::server {
namespace {

using chat_template_internal::Expr;
using chat_template_internal::Node;
using Json = nlohmann::json;

absl::Status Unsupported(size_t at, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("chat template: ", what, " (at byte ", at, ") is outside the supported subset"));
}
absl::Status Syntax(size_t at, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("chat template: ", what, " at byte ", at));
}

// One piece of the template: text, an output tag's or a statement tag's inside.
struct Segment {
  enum class Kind { kText, kOutput, kStatement } kind;
  std::string body;
  size_t at = 0;  // byte offset in the source
};

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// Strips trailing whitespace (all of it) or, for lstrip_blocks, the blanks ending `*s` when they
// start a line: after a newline in `*s`, or at its start when `starts_line`.
void RightStrip(std::string* s, bool all_space, bool starts_line) {
  size_t end = s->size();
  while (end > 0 && (all_space ? std::isspace(static_cast<unsigned char>((*s)[end - 1])) : IsBlank((*s)[end - 1]))) {
    --end;
  }
  if (!all_space && (end > 0 ? (*s)[end - 1] != '\n' : !starts_line)) return;
  s->resize(end);
}

// The template's segments. `{%-` / `{{-` strip whitespace before, `-%}` / `-}}` after; a block tag
// eats the newline after it (trim_blocks) and the blanks before it on its line (lstrip_blocks).
absl::StatusOr<std::vector<Segment>> Split(absl::string_view src) {
  std::vector<Segment> out;
  std::string text;
  bool strip_next = false, trim_newline = false;
  bool at_line_start = true;       // the source position i starts a line (as far as output goes)
  bool text_starts_line = true;    // `text` began at a line start
  size_t i = 0;
  while (i < src.size()) {
    const size_t open = src.find('{', i);
    const bool tag = open != absl::string_view::npos && open + 1 < src.size() &&
                     (src[open + 1] == '{' || src[open + 1] == '%' || src[open + 1] == '#');
    const size_t text_end = tag ? open : (open == absl::string_view::npos ? src.size() : open + 1);
    absl::string_view piece = src.substr(i, text_end - i);
    if (strip_next) {
      while (!piece.empty() && std::isspace(static_cast<unsigned char>(piece.front()))) piece.remove_prefix(1);
      if (!piece.empty()) strip_next = false;
    } else if (trim_newline && !piece.empty() && piece.front() == '\n') {
      piece.remove_prefix(1);
      at_line_start = true;
    }
    trim_newline = false;
    if (text.empty()) text_starts_line = at_line_start;
    text.append(piece.data(), piece.size());
    i = text_end;
    if (!tag) continue;
    const char kind = src[open + 1];
    const absl::string_view close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    const size_t end = src.find(close, open + 2);
    if (end == absl::string_view::npos) return Syntax(open, absl::StrCat("unclosed tag (no \"", close, "\")"));
    size_t inner_begin = open + 2, inner_end = end;
    const bool strip_before = inner_begin < inner_end && src[inner_begin] == '-';
    if (strip_before) ++inner_begin;
    if (inner_end > inner_begin && src[inner_end - 1] == '-') {
      --inner_end;
      strip_next = true;
    } else {
      strip_next = false;
    }
    if (inner_begin < inner_end && src[inner_begin] == '+') return Unsupported(open, "\"+\" whitespace control");
    if (strip_before) RightStrip(&text, /*all_space=*/true, text_starts_line);
    else if (kind != '{') RightStrip(&text, /*all_space=*/false, text_starts_line);
    trim_newline = kind != '{';
    at_line_start = false;
    if (!text.empty()) out.push_back({Segment::Kind::kText, std::move(text), i});
    text.clear();
    if (kind != '#') {
      out.push_back({kind == '{' ? Segment::Kind::kOutput : Segment::Kind::kStatement,
                     std::string(src.substr(inner_begin, inner_end - inner_begin)), open});
    }
    i = end + 2;
  }
  if (!text.empty()) out.push_back({Segment::Kind::kText, std::move(text), i});
  return out;
}

struct Token {
  enum class Kind { kName, kString, kInt, kOp, kEnd } kind;
  std::string text;
  int64_t value = 0;
};

absl::StatusOr<std::vector<Token>> Lex(absl::string_view s, size_t at) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      out.push_back({Token::Kind::kName, std::string(s.substr(i, j - i))});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      int64_t v = 0;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) {
        if (v > 1'000'000'000) return Unsupported(at, "an integer literal this large");
        v = v * 10 + (s[j++] - '0');
      }
      if (j < s.size() && s[j] == '.') return Unsupported(at, "a float literal");
      out.push_back({Token::Kind::kInt, std::string(s.substr(i, j - i)), v});
      i = j;
    } else if (c == '\'' || c == '"') {
      std::string value;
      size_t j = i + 1;
      for (; j < s.size() && s[j] != c; ++j) {
        if (s[j] != '\\' || j + 1 == s.size()) {
          value += s[j];
          continue;
        }
        const char e = s[++j];
        value += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
      }
      if (j >= s.size()) return Syntax(at, "unterminated string literal");
      out.push_back({Token::Kind::kString, std::move(value)});
      i = j + 1;
    } else {
      const absl::string_view two = s.substr(i, 2);
      if (two == "==" || two == "!=") {
        out.push_back({Token::Kind::kOp, std::string(two)});
        i += 2;
      } else if (absl::string_view("+~()[].,|=:-").find(c) != absl::string_view::npos) {
        out.push_back({Token::Kind::kOp, std::string(1, c)});
        ++i;
      } else {
        return Unsupported(at, absl::StrCat("the operator \"", s.substr(i, two == "<=" || two == ">=" ||
                                                                              two == "**" || two == "//" ? 2 : 1),
                                            "\""));
      }
    }
  }
  out.push_back({Token::Kind::kEnd, ""});
  return out;
}

// A recursive-descent parser over one tag's tokens. Precedence, loosest first: or, and, not,
// comparisons (== != in), concatenation (+ ~), postfix (. [] | is), primary.
class ExprParser {
 public:
  ExprParser(std::vector<Token> tokens, size_t at) : t_(std::move(tokens)), at_(at) {}

  absl::StatusOr<std::unique_ptr<Expr>> Parse() { return Or(); }
  bool AtEnd() const { return t_[i_].kind == Token::Kind::kEnd; }
  absl::Status ExpectEnd() const {
    if (AtEnd()) return absl::OkStatus();
    return Unsupported(at_, absl::StrCat("\"", t_[i_].text, "\" here"));
  }
  // The next token as a bare name (for `for x in`, `set x =`), consumed; "" if it is not one.
  std::string TakeName() { return t_[i_].kind == Token::Kind::kName ? t_[i_++].text : std::string(); }
  bool TakeOp(absl::string_view op) { return Take(Token::Kind::kOp, op); }
  bool TakeWord(absl::string_view word) { return Take(Token::Kind::kName, word); }

 private:
  using Result = absl::StatusOr<std::unique_ptr<Expr>>;

  bool Take(Token::Kind kind, absl::string_view text) {
    if (t_[i_].kind != kind || t_[i_].text != text) return false;
    ++i_;
    return true;
  }
  static std::unique_ptr<Expr> Make(Expr::Kind kind, std::string name, std::unique_ptr<Expr> a,
                                    std::unique_ptr<Expr> b = nullptr) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->name = std::move(name);
    if (a) e->args.push_back(std::move(a));
    if (b) e->args.push_back(std::move(b));
    return e;
  }
  Result Binary(Result (ExprParser::*next)(), std::initializer_list<absl::string_view> ops, bool words) {
    auto left = (this->*next)();
    if (!left.ok()) return left;
    while (true) {
      std::string op;
      for (absl::string_view o : ops) {
        if (words ? TakeWord(o) : TakeOp(o)) op = std::string(o);
        if (!op.empty()) break;
      }
      if (op.empty()) return left;
      auto right = (this->*next)();
      if (!right.ok()) return right;
      left = Make(Expr::Kind::kBinary, op, std::move(*left), std::move(*right));
    }
  }
  Result Or() { return Binary(&ExprParser::And, {"or"}, true); }
  Result And() { return Binary(&ExprParser::Not, {"and"}, true); }
  Result Not() {
    if (!TakeWord("not")) return Compare();
    auto operand = Not();
    if (!operand.ok()) return operand;
    return Make(Expr::Kind::kNot, "not", std::move(*operand));
  }
  Result Compare() {
    auto left = Concat();
    if (!left.ok()) return left;
    while (true) {
      std::string op;
      if (TakeOp("==")) op = "==";
      else if (TakeOp("!=")) op = "!=";
      else if (TakeWord("in")) op = "in";
      else if (t_[i_].text == "not" && t_[i_ + 1].text == "in") {
        i_ += 2;
        op = "not in";
      } else {
        return left;
      }
      auto right = Concat();
      if (!right.ok()) return right;
      left = Make(Expr::Kind::kBinary, op, std::move(*left), std::move(*right));
    }
  }
  Result Concat() { return Binary(&ExprParser::Postfix, {"+", "~"}, false); }
  Result Postfix() {
    auto e = Primary();
    if (!e.ok()) return e;
    while (true) {
      if (TakeOp(".")) {
        std::string attr = TakeName();
        if (attr.empty()) return Syntax(at_, "a name must follow \".\"");
        e = Make(Expr::Kind::kAttr, attr, std::move(*e));
      } else if (TakeOp("[")) {
        if (t_[i_].text == ":" ) return Unsupported(at_, "slicing");
        auto index = Or();
        if (!index.ok()) return index;
        if (!TakeOp("]")) return Unsupported(at_, "a subscript other than [expression] (slicing)");
        e = Make(Expr::Kind::kIndex, "[]", std::move(*e), std::move(*index));
      } else if (TakeOp("|")) {
        std::string filter = TakeName();
        if (filter != "trim" && filter != "length") return Unsupported(at_, absl::StrCat("the filter \"", filter, "\""));
        if (t_[i_].text == "(") return Unsupported(at_, absl::StrCat("arguments to the filter \"", filter, "\""));
        e = Make(Expr::Kind::kFilter, filter, std::move(*e));
      } else if (TakeWord("is")) {
        const bool negated = TakeWord("not");
        std::string test = TakeName();
        if (test != "defined" && test != "undefined" && test != "none" && test != "string") {
          return Unsupported(at_, absl::StrCat("the test \"", test, "\""));
        }
        e = Make(Expr::Kind::kTest, test, std::move(*e));
        (*e)->negated = negated;
      } else if (t_[i_].text == "(") {
        return Unsupported(at_, "calling a method or a value");
      } else {
        return e;
      }
    }
  }
  Result Primary() {
    const Token& t = t_[i_];
    if (t.kind == Token::Kind::kString || t.kind == Token::Kind::kInt) {
      ++i_;
      auto e = std::make_unique<Expr>();
      e->literal = t.kind == Token::Kind::kString ? Json(t.text) : Json(t.value);
      return e;
    }
    if (TakeOp("-")) {  // a negative integer literal (messages[-1])
      if (t_[i_].kind != Token::Kind::kInt) return Unsupported(at_, "unary \"-\" of anything but an integer");
      auto e = std::make_unique<Expr>();
      e->literal = -t_[i_++].value;
      return e;
    }
    if (TakeOp("(")) {
      auto inner = Or();
      if (!inner.ok()) return inner;
      if (!TakeOp(")")) return Unsupported(at_, "a tuple or an unclosed \"(\"");
      return inner;
    }
    if (t.kind == Token::Kind::kOp && t.text == "[") return Unsupported(at_, "a list literal");
    if (t.kind != Token::Kind::kName) return Syntax(at_, absl::StrCat("expected a value, found \"", t.text, "\""));
    ++i_;
    auto e = std::make_unique<Expr>();
    if (t.text == "true" || t.text == "True") e->literal = true;
    else if (t.text == "false" || t.text == "False") e->literal = false;
    else if (t.text == "none" || t.text == "None") e->literal = nullptr;
    else if (t.text == "raise_exception") return Call();
    else {
      e->kind = Expr::Kind::kName;
      e->name = t.text;
      if (t_[i_].text == "(") return Unsupported(at_, absl::StrCat("calling \"", t.text, "\""));
    }
    return e;
  }
  Result Call() {
    if (!TakeOp("(")) return Syntax(at_, "raise_exception needs (message)");
    auto message = Or();
    if (!message.ok()) return message;
    if (!TakeOp(")")) return Syntax(at_, "raise_exception takes one argument");
    return Make(Expr::Kind::kCall, "raise_exception", std::move(*message));
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  const size_t at_;
};

// Parses the statements from segs[*i] until one of `ends` (an end tag's first word), which is left
// in *end (its parser positioned after the word); "" at the end of the template.
class BlockParser {
 public:
  explicit BlockParser(const std::vector<Segment>& segs) : segs_(segs) {}

  absl::Status Block(std::vector<Node>* out, std::initializer_list<absl::string_view> ends, std::string* end,
                     std::unique_ptr<ExprParser>* end_parser) {
    end->clear();
    while (i_ < segs_.size()) {
      const Segment& s = segs_[i_++];
      if (s.kind == Segment::Kind::kText) {
        Node n;
        n.text = s.body;
        out->push_back(std::move(n));
        continue;
      }
      auto tokens = Lex(s.body, s.at);
      if (!tokens.ok()) return tokens.status();
      auto p = std::make_unique<ExprParser>(std::move(*tokens), s.at);
      if (s.kind == Segment::Kind::kOutput) {
        Node n;
        n.kind = Node::Kind::kOutput;
        auto e = p->Parse();
        if (!e.ok()) return e.status();
        if (absl::Status st = p->ExpectEnd(); !st.ok()) return st;
        n.expr = std::move(*e);
        out->push_back(std::move(n));
        continue;
      }
      const std::string word = p->TakeName();
      for (absl::string_view e : ends) {
        if (word == e) {
          *end = word;
          *end_parser = std::move(p);
          return absl::OkStatus();
        }
      }
      absl::Status st = word == "for" ? For(*p, s.at, out) : word == "if" ? If(*p, s.at, out)
                      : word == "set" ? Set(*p, s.at, out)
                      : word.empty() ? Syntax(s.at, "a statement tag without a statement")
                      : Unsupported(s.at, absl::StrCat("{% ", word, " %}"));
      if (!st.ok()) return st;
    }
    return absl::OkStatus();
  }

 private:
  absl::Status For(ExprParser& p, size_t at, std::vector<Node>* out) {
    Node n;
    n.kind = Node::Kind::kFor;
    n.text = p.TakeName();
    if (n.text.empty()) return Syntax(at, "{% for %} needs a loop variable");
    if (p.TakeOp(",")) return Unsupported(at, "unpacking in {% for %}");
    if (!p.TakeWord("in")) return Syntax(at, "{% for x in ... %} needs \"in\"");
    auto seq = p.Parse();
    if (!seq.ok()) return seq.status();
    if (p.TakeWord("if")) return Unsupported(at, "a filtered {% for ... if %}");
    if (p.TakeWord("recursive")) return Unsupported(at, "a recursive loop");
    if (absl::Status s = p.ExpectEnd(); !s.ok()) return s;
    n.expr = std::move(*seq);
    std::string end;
    std::unique_ptr<ExprParser> ep;
    if (absl::Status s = Block(&n.body, {"endfor", "else"}, &end, &ep); !s.ok()) return s;
    if (end == "else") return Unsupported(at, "{% for %}...{% else %}");
    if (end.empty()) return Syntax(at, "{% for %} without {% endfor %}");
    out->push_back(std::move(n));
    return absl::OkStatus();
  }

  absl::Status If(ExprParser& p, size_t at, std::vector<Node>* out) {
    Node n;
    n.kind = Node::Kind::kIf;
    ExprParser* cond_parser = &p;
    std::unique_ptr<ExprParser> owned;
    bool is_else = false;
    while (true) {
      std::unique_ptr<Expr> cond;
      if (!is_else) {
        auto c = cond_parser->Parse();
        if (!c.ok()) return c.status();
        cond = std::move(*c);
      }
      if (absl::Status s = cond_parser->ExpectEnd(); !s.ok()) return s;
      std::vector<Node> body;
      std::string end;
      std::unique_ptr<ExprParser> next;
      if (absl::Status s = Block(&body, {"elif", "else", "endif"}, &end, &next); !s.ok()) return s;
      n.branches.emplace_back(std::move(cond), std::move(body));
      if (end.empty()) return Syntax(at, "{% if %} without {% endif %}");
      if (end == "endif") {
        if (absl::Status s = next->ExpectEnd(); !s.ok()) return s;
        break;
      }
      if (is_else) return Syntax(at, absl::StrCat("{% ", end, " %} after {% else %}"));
      is_else = end == "else";
      owned = std::move(next);
      cond_parser = owned.get();
    }
    out->push_back(std::move(n));
    return absl::OkStatus();
  }

  absl::Status Set(ExprParser& p, size_t at, std::vector<Node>* out) {
    Node n;
    n.kind = Node::Kind::kSet;
    n.text = p.TakeName();
    if (n.text.empty()) return Syntax(at, "{% set %} needs a name");
    if (p.TakeOp(".") || p.TakeOp(",")) return Unsupported(at, "{% set %} of an attribute or of several names");
    if (!p.TakeOp("=")) return Unsupported(at, "a {% set %} block");
    auto value = p.Parse();
    if (!value.ok()) return value.status();
    if (absl::Status s = p.ExpectEnd(); !s.ok()) return s;
    n.expr = std::move(*value);
    out->push_back(std::move(n));
    return absl::OkStatus();
  }

  const std::vector<Segment>& segs_;
  size_t i_ = 0;
};

}  // namespace

ChatTemplate::ChatTemplate(std::vector<Node> nodes) : nodes_(std::move(nodes)) {}
ChatTemplate::~ChatTemplate() = default;

absl::StatusOr<std::unique_ptr<ChatTemplate>> ChatTemplate::Parse(absl::string_view source) {
  auto segs = Split(source);
  if (!segs.ok()) return segs.status();
  std::vector<Node> nodes;
  BlockParser parser(*segs);
  std::string end;
  std::unique_ptr<ExprParser> ep;
  if (absl::Status s = parser.Block(&nodes, {"endfor", "endif", "elif", "else"}, &end, &ep); !s.ok()) return s;
  if (!end.empty()) return absl::InvalidArgumentError(absl::StrCat("chat template: {% ", end, " %} without its opening tag"));
  return std::unique_ptr<ChatTemplate>(new ChatTemplate(std::move(nodes)));
}

}  // namespace mcserve::server

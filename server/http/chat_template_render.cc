// ChatTemplate rendering: evaluates the trees of chat_template_ast.h over JSON values. An undefined
// value (a missing variable or key) is a discarded JSON value: false, printed as "", and an error
// when read further (as Jinja's default Undefined).
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "server/http/chat_template.h"
#include "server/http/chat_template_ast.h"

namespace mcserve::server {
namespace {

using chat_template_internal::Expr;
using chat_template_internal::Node;
using Json = nlohmann::json;

constexpr int kMaxOutputBytes = 16 << 20;  // a runaway template stops here

Json Undefined() { return Json(Json::value_t::discarded); }

absl::Status TemplateError(absl::string_view what) {
  return absl::InternalError(absl::StrCat("chat template: ", what));
}

const char* TypeName(const Json& v) {
  if (v.is_discarded()) return "undefined";
  if (v.is_null()) return "none";
  if (v.is_string()) return "string";
  if (v.is_boolean()) return "boolean";
  if (v.is_number()) return "number";
  if (v.is_array()) return "list";
  return "mapping";
}

bool Truthy(const Json& v) {
  if (v.is_discarded() || v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  if (v.is_string() || v.is_array() || v.is_object()) return !v.empty();
  return false;
}

absl::StatusOr<std::string> Print(const Json& v) {
  if (v.is_discarded()) return std::string();
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return std::string(v.get<bool>() ? "True" : "False");
  if (v.is_null()) return std::string("None");
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  return TemplateError(absl::StrCat("printing a ", TypeName(v), " is outside the supported subset"));
}

class Renderer {
 public:
  explicit Renderer(const Json& variables) { scopes_.push_back(variables); }

  absl::Status Run(const std::vector<Node>& nodes, std::string* out) {
    for (const Node& n : nodes) {
      if (absl::Status s = Statement(n, out); !s.ok()) return s;
      if (out->size() > kMaxOutputBytes) return TemplateError("the rendered prompt exceeds 16 MiB");
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Statement(const Node& n, std::string* out) {
    switch (n.kind) {
      case Node::Kind::kText:
        out->append(n.text);
        return absl::OkStatus();
      case Node::Kind::kOutput: {
        auto v = Eval(*n.expr);
        if (!v.ok()) return v.status();
        auto text = Print(*v);
        if (!text.ok()) return text.status();
        out->append(*text);
        return absl::OkStatus();
      }
      case Node::Kind::kSet: {
        auto v = Eval(*n.expr);
        if (!v.ok()) return v.status();
        scopes_.back()[n.text] = std::move(*v);
        return absl::OkStatus();
      }
      case Node::Kind::kIf:
        for (const auto& [cond, body] : n.branches) {
          bool take = cond == nullptr;
          if (!take) {
            auto v = Eval(*cond);
            if (!v.ok()) return v.status();
            take = Truthy(*v);
          }
          if (take) return Run(body, out);
        }
        return absl::OkStatus();
      case Node::Kind::kFor:
        return For(n, out);
    }
    return absl::OkStatus();
  }

  absl::Status For(const Node& n, std::string* out) {
    auto seq = Eval(*n.expr);
    if (!seq.ok()) return seq.status();
    if (!seq->is_array()) return TemplateError(absl::StrCat("{% for %} over a ", TypeName(*seq), ", not a list"));
    const int64_t length = static_cast<int64_t>(seq->size());
    for (int64_t i = 0; i < length; ++i) {
      Json scope = Json::object();
      scope[n.text] = (*seq)[static_cast<size_t>(i)];
      scope["loop"] = {{"index", i + 1}, {"index0", i},          {"first", i == 0},
                       {"last", i + 1 == length}, {"length", length}, {"revindex", length - i}};
      scopes_.push_back(std::move(scope));
      absl::Status s = Run(n.body, out);
      scopes_.pop_back();
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

  Json Lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      if (auto found = it->find(name); found != it->end()) return *found;
    }
    return Undefined();
  }

  static absl::StatusOr<Json> Member(const Json& subject, const Json& key) {
    if (subject.is_object() && key.is_string()) {
      auto it = subject.find(key.get<std::string>());
      return it == subject.end() ? Undefined() : *it;
    }
    if (subject.is_array() && key.is_number_integer()) {
      int64_t i = key.get<int64_t>();
      const int64_t size = static_cast<int64_t>(subject.size());
      if (i < 0) i += size;
      return i >= 0 && i < size ? subject[static_cast<size_t>(i)] : Undefined();
    }
    if (subject.is_discarded() || subject.is_null()) {
      return TemplateError(absl::StrCat("reading ", key.dump(), " of an ", TypeName(subject), " value"));
    }
    return TemplateError(absl::StrCat("reading ", key.dump(), " of a ", TypeName(subject)));
  }

  absl::StatusOr<Json> Binary(const std::string& op, const Json& a, const Json& b) {
    if (op == "==") return a.is_discarded() || b.is_discarded() ? Json(false) : Json(a == b);
    if (op == "!=") return a.is_discarded() || b.is_discarded() ? Json(true) : Json(a != b);
    if (op == "~") {
      auto x = Print(a), y = Print(b);
      if (!x.ok()) return x.status();
      if (!y.ok()) return y.status();
      return Json(*x + *y);
    }
    if (op == "+") {
      if (a.is_string() && b.is_string()) return Json(a.get<std::string>() + b.get<std::string>());
      if (a.is_number_integer() && b.is_number_integer()) return Json(a.get<int64_t>() + b.get<int64_t>());
      if (a.is_array() && b.is_array()) {
        Json out = a;
        for (const Json& v : b) out.push_back(v);
        return out;
      }
      return TemplateError(absl::StrCat("\"+\" of a ", TypeName(a), " and a ", TypeName(b)));
    }
    if (op == "in" || op == "not in") {
      bool found = false;
      if (b.is_string() && a.is_string()) found = b.get<std::string>().find(a.get<std::string>()) != std::string::npos;
      else if (b.is_array()) found = std::find(b.begin(), b.end(), a) != b.end();
      else if (b.is_object() && a.is_string()) found = b.contains(a.get<std::string>());
      else return TemplateError(absl::StrCat("\"in\" a ", TypeName(b)));
      return Json(op == "in" ? found : !found);
    }
    return TemplateError(absl::StrCat("the operator \"", op, "\""));
  }

  absl::StatusOr<Json> Eval(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return e.literal;
      case Expr::Kind::kName:
        return Lookup(e.name);
      case Expr::Kind::kNot: {
        auto v = Eval(*e.args[0]);
        if (!v.ok()) return v;
        return Json(!Truthy(*v));
      }
      case Expr::Kind::kBinary:
        return BinaryExpr(e);
      case Expr::Kind::kAttr:
      case Expr::Kind::kIndex: {
        auto subject = Eval(*e.args[0]);
        if (!subject.ok()) return subject;
        if (e.kind == Expr::Kind::kAttr) return Member(*subject, Json(e.name));
        auto key = Eval(*e.args[1]);
        if (!key.ok()) return key;
        return Member(*subject, *key);
      }
      case Expr::Kind::kFilter:
      case Expr::Kind::kTest:
        return FilterOrTest(e);
      case Expr::Kind::kCall: {
        auto message = Eval(*e.args[0]);
        if (!message.ok()) return message;
        auto text = Print(*message);
        return absl::InvalidArgumentError(
            absl::StrCat("the model's chat template refused the messages: ", text.ok() ? *text : "(no message)"));
      }
    }
    return TemplateError("an unknown expression");
  }

  absl::StatusOr<Json> BinaryExpr(const Expr& e) {
    auto a = Eval(*e.args[0]);
    if (!a.ok()) return a;
    if (e.name == "and" && !Truthy(*a)) return Json(false);
    if (e.name == "or" && Truthy(*a)) return *a;
    auto b = Eval(*e.args[1]);
    if (!b.ok()) return b;
    if (e.name == "and" || e.name == "or") return *b;
    return Binary(e.name, *a, *b);
  }

  absl::StatusOr<Json> FilterOrTest(const Expr& e) {
    auto v = Eval(*e.args[0]);
    if (!v.ok()) return v;
    if (e.kind == Expr::Kind::kTest) {
      bool result = e.name == "defined"     ? !v->is_discarded()
                    : e.name == "undefined" ? v->is_discarded()
                    : e.name == "none"      ? v->is_null()
                                            : v->is_string();
      return Json(e.negated ? !result : result);
    }
    if (e.name == "length") {
      if (v->is_string() || v->is_array() || v->is_object()) return Json(static_cast<int64_t>(v->size()));
      return TemplateError(absl::StrCat("length of a ", TypeName(*v)));
    }
    if (!v->is_string()) return TemplateError(absl::StrCat("trim of a ", TypeName(*v)));
    return Json(std::string(absl::StripAsciiWhitespace(v->get<std::string>())));
  }

  std::vector<Json> scopes_;  // variables, then one scope per enclosing loop
};

}  // namespace

absl::StatusOr<std::string> ChatTemplate::Render(const nlohmann::json& variables) const {
  if (!variables.is_object()) return absl::InvalidArgumentError("chat template: the variables must be an object");
  std::string out;
  Renderer renderer(variables);
  if (absl::Status s = renderer.Run(nodes_, &out); !s.ok()) return s;
  return out;
}

}  // namespace mcserve::server

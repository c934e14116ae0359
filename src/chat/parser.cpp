#include "chat/parser.h"

#include <initializer_list>
#include <iterator>
#include <optional>
#include <set>

namespace tpbatch::chat {
namespace {

ExprPtr make(Expr::Kind k, SourcePos p) {
  auto e = std::make_unique<Expr>();
  e->kind = k;
  e->pos = p;
  return e;
}

// Expressions inside one tag.
class ExprParser {
 public:
  explicit ExprParser(const std::vector<Token>& tokens) : t_(tokens) {}

  const Token& peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  bool at_end() const { return peek().kind == Token::Kind::End; }
  bool is_op(const char* op, size_t ahead = 0) const {
    return peek(ahead).kind == Token::Kind::Op && peek(ahead).text == op;
  }
  bool is_name(const char* n, size_t ahead = 0) const {
    return peek(ahead).kind == Token::Kind::Name && peek(ahead).text == n;
  }
  const Token& next() { return t_[std::min(i_++, t_.size() - 1)]; }
  void expect_op(const char* op) {
    if (!is_op(op)) fail(peek().pos, std::string("expected '") + op + "', got " + describe(peek()));
    ++i_;
  }
  std::string expect_name() {
    if (peek().kind != Token::Kind::Name) fail(peek().pos, "expected a name, got " + describe(peek()));
    return next().text;
  }
  void expect_end(const char* tag) {
    if (!at_end()) fail(peek().pos, std::string("unexpected ") + describe(peek()) + " in " + tag);
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Token::Kind::End: return "the end of the tag";
      case Token::Kind::String: return "a string";
      case Token::Kind::Int:
      case Token::Kind::Float: return "the number " + t.text;
      default: return "'" + t.text + "'";
    }
  }

  ExprPtr expression(bool with_condexpr = true) {
    ExprPtr e = or_expr();
    if (with_condexpr && is_name("if")) {
      const SourcePos p = next().pos;
      auto c = make(Expr::Kind::Cond, p);
      c->a = std::move(e);
      c->b = or_expr();
      if (is_name("else")) {
        ++i_;
        c->c = expression();
      }
      return c;
    }
    return e;
  }

 private:
  ExprPtr binary(const std::string& op, ExprPtr l, ExprPtr r, SourcePos p) {
    auto e = make(Expr::Kind::Binary, p);
    e->name = op;
    e->a = std::move(l);
    e->b = std::move(r);
    return e;
  }

  // Binary operators, loosest first, as Jinja2 parses them (parse_or ... parse_pow): each level is
  // left-associative over the next tighter one. Prefix `not` binds between `and` and the
  // comparisons, which also take the keywords `in` and `not in`.
  struct BinaryLevel {
    Token::Kind kind;  // Name: keyword operators, Op: symbols
    std::initializer_list<const char*> ops;
  };
  static constexpr BinaryLevel kBinaryLevels[] = {
      {Token::Kind::Name, {"or"}},
      {Token::Kind::Name, {"and"}},
      {Token::Kind::Op, {"==", "!=", "<", ">", "<=", ">="}},
      {Token::Kind::Op, {"+", "-"}},
      {Token::Kind::Op, {"~"}},
      {Token::Kind::Op, {"*", "/", "//", "%"}},
      {Token::Kind::Op, {"**"}},
  };
  static constexpr size_t kCompareLevel = 2;

  ExprPtr or_expr() { return binary_level(0); }

  // An operator of `level` at the cursor, consumed; nullopt (nothing consumed) when there is none.
  std::optional<std::string> take_operator(size_t level) {
    const BinaryLevel& l = kBinaryLevels[level];
    for (const char* op : l.ops)
      if (peek().kind == l.kind && peek().text == op) return next().text;
    if (level == kCompareLevel) {
      if (is_name("in")) {
        ++i_;
        return "in";
      }
      if (is_name("not") && is_name("in", 1)) {
        i_ += 2;
        return "not in";
      }
    }
    return std::nullopt;
  }
  // What the operators of `level` join: the next tighter level, `not` below `and`, unary at the end.
  ExprPtr operand(size_t level) {
    if (level + 1 == kCompareLevel) return not_expr();
    if (level + 1 == std::size(kBinaryLevels)) return unary();
    return binary_level(level + 1);
  }
  ExprPtr binary_level(size_t level) {
    ExprPtr l = operand(level);
    for (;;) {
      const SourcePos p = peek().pos;
      std::optional<std::string> op = take_operator(level);
      if (!op) return l;
      l = binary(*op, std::move(l), operand(level), p);
    }
  }
  ExprPtr not_expr() {
    if (is_name("not")) {
      auto e = make(Expr::Kind::Not, next().pos);
      e->a = not_expr();
      return e;
    }
    return binary_level(kCompareLevel);
  }
  ExprPtr unary(bool with_filter = true) {
    ExprPtr e;
    if (is_op("-")) {
      e = make(Expr::Kind::Neg, next().pos);
      e->a = unary(false);
    } else if (is_op("+")) {
      ++i_;
      e = unary(false);
    } else {
      e = postfix(primary());
    }
    if (with_filter) e = filters(std::move(e));
    return e;
  }

  ExprPtr primary() {
    const Token& t = peek();
    switch (t.kind) {
      case Token::Kind::Name: {
        ++i_;
        auto lit = make(Expr::Kind::Literal, t.pos);
        if (t.text == "true" || t.text == "True") lit->literal = Value::boolean(true);
        else if (t.text == "false" || t.text == "False") lit->literal = Value::boolean(false);
        else if (t.text == "none" || t.text == "None") lit->literal = Value::none();
        else {
          auto n = make(Expr::Kind::Name, t.pos);
          n->name = t.text;
          return n;
        }
        return lit;
      }
      case Token::Kind::String: {
        auto lit = make(Expr::Kind::Literal, t.pos);
        std::string s;
        while (peek().kind == Token::Kind::String) s += next().text;  // adjacent literals join
        lit->literal = Value::string(std::move(s));
        return lit;
      }
      case Token::Kind::Int: {
        ++i_;
        auto lit = make(Expr::Kind::Literal, t.pos);
        lit->literal = Value::integer(std::stoll(t.text));
        return lit;
      }
      case Token::Kind::Float: {
        ++i_;
        auto lit = make(Expr::Kind::Literal, t.pos);
        lit->literal = Value::number(std::stod(t.text));
        return lit;
      }
      case Token::Kind::Op:
        if (t.text == "(") {
          ++i_;
          ExprPtr e = expression();
          if (is_op(",")) fail(peek().pos, "tuples are not supported");
          expect_op(")");
          return e;
        }
        if (t.text == "[") {
          auto l = make(Expr::Kind::List, next().pos);
          while (!is_op("]")) {
            l->args.push_back(expression());
            if (!is_op(",")) break;
            ++i_;
          }
          expect_op("]");
          return l;
        }
        if (t.text == "{") {
          auto d = make(Expr::Kind::Dict, next().pos);
          while (!is_op("}")) {
            d->args.push_back(expression());
            expect_op(":");
            d->values.push_back(expression());
            if (!is_op(",")) break;
            ++i_;
          }
          expect_op("}");
          return d;
        }
        [[fallthrough]];
      default: fail(t.pos, "unexpected " + describe(t));
    }
  }

  void call_args(Expr& e) {
    expect_op("(");
    while (!is_op(")")) {
      if (peek().kind == Token::Kind::Name && is_op("=", 1)) {
        std::string key = next().text;
        ++i_;
        e.kwargs.emplace_back(std::move(key), expression());
      } else {
        if (!e.kwargs.empty()) fail(peek().pos, "a positional argument after keyword arguments");
        e.args.push_back(expression());
      }
      if (!is_op(",")) break;
      ++i_;
    }
    expect_op(")");
  }

  ExprPtr postfix(ExprPtr e) {
    for (;;) {
      if (is_op(".")) {
        const SourcePos p = next().pos;
        auto a = make(Expr::Kind::Attr, p);
        if (peek().kind == Token::Kind::Int) {  // x.0 is x[0] in Jinja
          a->kind = Expr::Kind::Item;
          a->b = make(Expr::Kind::Literal, peek().pos);
          a->b->literal = Value::integer(std::stoll(next().text));
        } else {
          a->name = expect_name();
        }
        a->a = std::move(e);
        e = std::move(a);
      } else if (is_op("[")) {
        const SourcePos p = next().pos;
        ExprPtr start, stop, step;
        bool slice = false;
        if (!is_op(":")) start = expression();
        if (is_op(":")) {
          slice = true;
          ++i_;
          if (!is_op("]") && !is_op(":")) stop = expression();
          if (is_op(":")) {
            ++i_;
            if (!is_op("]")) step = expression();
          }
        }
        expect_op("]");
        if (slice) {
          auto s = make(Expr::Kind::Slice, p);
          s->a = std::move(e);
          s->slice_start = std::move(start);
          s->slice_stop = std::move(stop);
          s->slice_step = std::move(step);
          e = std::move(s);
        } else {
          auto it = make(Expr::Kind::Item, p);
          it->a = std::move(e);
          it->b = std::move(start);
          e = std::move(it);
        }
      } else if (is_op("(")) {
        e = call(std::move(e));
      } else {
        return e;
      }
    }
  }

  // callee(args...): a call after a postfix expression or after a filter or test.
  ExprPtr call(ExprPtr callee) {
    auto c = make(Expr::Kind::Call, peek().pos);
    c->a = std::move(callee);
    call_args(*c);
    return c;
  }

  ExprPtr filters(ExprPtr e) {
    for (;;) {
      if (is_op("|")) {
        const SourcePos p = next().pos;
        auto f = make(Expr::Kind::Filter, p);
        f->name = expect_name();
        while (is_op(".")) {  // dotted filter names
          ++i_;
          f->name += "." + expect_name();
        }
        f->a = std::move(e);
        if (is_op("(")) call_args(*f);
        e = std::move(f);
      } else if (is_name("is")) {
        const SourcePos p = next().pos;
        auto t = make(Expr::Kind::Test, p);
        if (is_name("not")) {
          ++i_;
          t->negated = true;
        }
        t->name = expect_name();
        t->a = std::move(e);
        if (is_op("(")) {
          call_args(*t);
        } else {
          const Token& n = peek();
          const bool arg_follows =
              n.kind == Token::Kind::String || n.kind == Token::Kind::Int || n.kind == Token::Kind::Float ||
              (n.kind == Token::Kind::Name && n.text != "else" && n.text != "or" && n.text != "and" &&
               n.text != "if" && n.text != "is" && n.text != "in" && n.text != "not") ||
              (n.kind == Token::Kind::Op && (n.text == "[" || n.text == "{"));
          if (arg_follows) t->args.push_back(postfix(primary()));
        }
        e = std::move(t);
      } else if (is_op("(")) {
        e = call(std::move(e));
      } else {
        return e;
      }
    }
  }

  const std::vector<Token>& t_;
  size_t i_ = 0;
};

// Statements across pieces.
class StmtParser {
 public:
  explicit StmtParser(std::vector<Piece> pieces) : p_(std::move(pieces)) {}

  Template run() {
    Template t;
    std::string end_tag;
    t.body = body({}, end_tag);
    return t;
  }

 private:
  // Parses until one of `ends` (a statement keyword) or the end of the template; `found` gets it.
  Body body(const std::set<std::string>& ends, std::string& found) {
    Body out;
    while (i_ < p_.size()) {
      const Piece& piece = p_[i_];
      if (piece.kind == Piece::Kind::Text) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Text;
        s->pos = piece.pos;
        s->text = piece.text;
        out.push_back(std::move(s));
        ++i_;
        continue;
      }
      ExprParser e(piece.tokens);
      if (piece.kind == Piece::Kind::Output) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Output;
        s->pos = piece.pos;
        if (e.at_end()) fail(piece.pos, "empty expression {{ }}");
        s->expr = e.expression();
        e.expect_end("{{ }}");
        out.push_back(std::move(s));
        ++i_;
        continue;
      }
      if (e.peek().kind != Token::Kind::Name) fail(piece.pos, "expected a statement name after {%");
      const std::string kw = e.peek().text;
      if (ends.count(kw)) {
        found = kw;
        return out;  // the caller consumes the end tag
      }
      ++i_;
      e.next();
      out.push_back(statement(kw, e, piece.pos));
    }
    if (!ends.empty()) {
      std::string list;
      for (const auto& k : ends) list += (list.empty() ? "" : " or ") + ("{% " + k + " %}");
      fail(p_.empty() ? SourcePos{} : p_.back().pos, "the template ends before " + list);
    }
    found.clear();
    return out;
  }

  // Consumes the tag that ended a body (body() leaves it for its caller): a parser over the tag,
  // past its name (elif, else, endif, endfor).
  ExprParser closing_tag() {
    ExprParser tag(p_[i_].tokens);
    tag.next();
    ++i_;
    return tag;
  }

  std::unique_ptr<Stmt> statement(const std::string& kw, ExprParser& e, SourcePos pos) {
    auto s = std::make_unique<Stmt>();
    s->pos = pos;
    if (kw == "if") {
      s->kind = Stmt::Kind::If;
      ExprPtr cond = e.expression();
      e.expect_end("{% if %}");
      for (;;) {
        std::string found;
        Body b = body({"elif", "else", "endif"}, found);
        s->branches.emplace_back(std::move(cond), std::move(b));
        ExprParser tag = closing_tag();
        if (found == "elif") {
          cond = tag.expression();
          tag.expect_end("{% elif %}");
          continue;
        }
        if (found == "else") {
          tag.expect_end("{% else %}");
          s->else_body = body({"endif"}, found);
          closing_tag().expect_end("{% endif %}");
        } else {
          tag.expect_end("{% endif %}");
        }
        return s;
      }
    }
    if (kw == "for") {
      s->kind = Stmt::Kind::For;
      s->targets.push_back(e.expect_name());
      while (e.is_op(",")) {
        e.next();
        s->targets.push_back(e.expect_name());
      }
      if (!e.is_name("in")) fail(e.peek().pos, "expected 'in' in {% for %}, got " + ExprParser::describe(e.peek()));
      e.next();
      s->expr = e.expression(false);
      if (e.is_name("if")) {
        e.next();
        s->filter = e.expression(false);
      }
      if (e.is_name("recursive")) fail(e.peek().pos, "unsupported: recursive for loops");
      e.expect_end("{% for %}");
      std::string found;
      s->body = body({"else", "endfor"}, found);
      closing_tag().expect_end(found == "else" ? "{% else %}" : "{% endfor %}");
      if (found == "else") {
        s->else_body = body({"endfor"}, found);
        closing_tag().expect_end("{% endfor %}");
      }
      return s;
    }
    if (kw == "set") {
      s->kind = Stmt::Kind::Set;
      s->targets.push_back(e.expect_name());
      if (e.is_op(".")) {
        e.next();
        s->set_attribute = e.expect_name();
      }
      if (e.is_op(",")) fail(e.peek().pos, "unsupported: {% set %} with several targets");
      if (e.at_end()) fail(pos, "unsupported: block {% set %} ... {% endset %}");
      e.expect_op("=");
      s->expr = e.expression();
      e.expect_end("{% set %}");
      return s;
    }
    if (kw == "break" || kw == "continue") {
      s->kind = kw == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue;
      e.expect_end(kw == "break" ? "{% break %}" : "{% continue %}");
      return s;
    }
    if (kw == "elif" || kw == "else" || kw == "endif" || kw == "endfor" || kw == "endset")
      fail(pos, "{% " + kw + " %} without its opening statement");
    fail(pos, "unsupported statement {% " + kw + " %}");
  }

  std::vector<Piece> p_;
  size_t i_ = 0;
};

}  // namespace

Template parse_template(std::string_view source) { return StmtParser(lex_template(source)).run(); }

}  // namespace tpbatch::chat

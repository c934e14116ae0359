#include "tokenizer/post_processor.h"

#include <map>
#include <string>

#include "tokenizer/vocab.h"

namespace tpbatch::tok {

namespace {

class NoopPostProcessor : public PostProcessor {
 public:
  void process(std::vector<int32_t>&, bool) const override {}
};

class SequencePostProcessor : public PostProcessor {
 public:
  std::vector<std::unique_ptr<PostProcessor>> parts;
  void process(std::vector<int32_t>& ids, bool add) const override {
    for (const auto& p : parts) p->process(ids, add);
  }
};

// Template for one sequence: runs of special ids around the single sequence "$A".
class TemplatePostProcessor : public PostProcessor {
 public:
  struct Piece {
    bool is_sequence;
    std::vector<int32_t> ids;
  };
  std::vector<Piece> single;
  void process(std::vector<int32_t>& ids, bool add) const override {
    if (!add) return;
    std::vector<int32_t> out;
    out.reserve(ids.size() + 4);
    for (const Piece& p : single) {
      if (p.is_sequence) out.insert(out.end(), ids.begin(), ids.end());
      else out.insert(out.end(), p.ids.begin(), p.ids.end());
    }
    ids = std::move(out);
  }
};

int32_t checked_id(int64_t v, const JsonPath& at) {
  if (v < 0 || v > kMaxTokenId) at.fail("id " + std::to_string(v) + " is out of range");
  return static_cast<int32_t>(v);
}

std::unique_ptr<PostProcessor> make_template(const Json& v, const JsonPath& at) {
  auto p = std::make_unique<TemplatePostProcessor>();
  // special_tokens: {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}
  std::map<std::string, std::vector<int32_t>> specials;
  if (const Json* st = member(v, "special_tokens", at)) {
    const JsonPath sat = at.child("special_tokens");
    if (!st->is_object()) sat.fail("must be an object");
    for (auto it = st->begin(); it != st->end(); ++it) {
      const JsonPath eat = sat.child(it.key());
      const Json& ids = require_array(it.value(), "ids", eat);
      std::vector<int32_t> list;
      for (size_t i = 0; i < ids.size(); ++i) list.push_back(checked_id(as_int(ids[i], eat.child("ids").index(i)), eat));
      specials[get_string(it.value(), "id", eat)] = std::move(list);
    }
  }
  const JsonPath tat = at.child("single");
  const Json& single = require(v, "single", at);
  auto add_special = [&](const std::string& name, const JsonPath& where) {
    auto f = specials.find(name);
    if (f == specials.end()) where.fail("names special token \"" + name + "\" missing from special_tokens");
    p->single.push_back({false, f->second});
  };
  if (single.is_string()) {  // "<s> $A" form
    const std::string s = single.get<std::string>();
    size_t i = 0;
    while (i < s.size()) {
      size_t j = s.find(' ', i);
      if (j == std::string::npos) j = s.size();
      std::string word = s.substr(i, j - i);
      i = j + 1;
      if (word.empty()) continue;
      if (auto colon = word.rfind(':'); colon != std::string::npos && colon > 0) word = word.substr(0, colon);
      if (word[0] == '$') p->single.push_back({true, {}});
      else add_special(word, tat);
    }
  } else if (single.is_array()) {
    for (size_t i = 0; i < single.size(); ++i) {
      const JsonPath eat = tat.index(i);
      const Json& e = single[i];
      if (const Json* sp = (e.is_object() ? member(e, "SpecialToken", eat) : nullptr)) {
        add_special(get_string(*sp, "id", eat.child("SpecialToken")), eat);
      } else if (e.is_object() && member(e, "Sequence", eat)) {
        p->single.push_back({true, {}});
      } else {
        eat.fail("must be {\"SpecialToken\": ...} or {\"Sequence\": ...}");
      }
    }
  } else {
    tat.fail("must be an array or a string");
  }
  return p;
}

// BertProcessing / RobertaProcessing: cls $A sep, with "cls": ["[CLS]", 101].
std::unique_ptr<PostProcessor> make_cls_sep(const Json& v, const JsonPath& at) {
  auto p = std::make_unique<TemplatePostProcessor>();
  auto read = [&](const char* key) {
    const Json& pair = require(v, key, at);
    const JsonPath kat = at.child(key);
    if (!pair.is_array() || pair.size() != 2) kat.fail("must be [token, id]");
    return checked_id(as_int(pair[1], kat.index(1)), kat);
  };
  int32_t cls = read("cls"), sep = read("sep");
  p->single = {{false, {cls}}, {true, {}}, {false, {sep}}};
  return p;
}

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const Json& v, const JsonPath& at) {
  at.check_depth();
  const std::string type = get_string(v, "type", at);
  if (type == "Sequence") return make_sequence<SequencePostProcessor>(v, "processors", at, make_post_processor);
  if (type == "ByteLevel") return std::make_unique<NoopPostProcessor>();
  if (type == "TemplateProcessing") return make_template(v, at);
  if (type == "BertProcessing" || type == "RobertaProcessing") return make_cls_sep(v, at);
  at.child("type").fail("\"" + type + "\" (post_processor) is not supported");
}

}  // namespace tpbatch::tok

// Reading tokenizer.json into an HfTokenizer (Tokenizer::load / Tokenizer::from_json_text).

#include "common/error.h"
#include "common/read_text.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/json_util.h"

namespace tpbatch {

using tok::Json;
using tok::JsonPath;

namespace {

// The added tokens. As HF (AddedVocabulary::add_tokens): a token whose text the model (or an earlier
// added token) already knows takes that id; any other takes the next id after the model's
// vocabulary and the added tokens so far. The "id" written in the file is only checked.
std::vector<tok::AddedToken> read_added_tokens(const Json& root, const JsonPath& top, tok::HfTokenizer& t) {
  std::vector<tok::AddedToken> added;
  if (const Json* arr = tok::member(root, "added_tokens", top)) {
    const JsonPath aat = top.child("added_tokens");
    if (!arr->is_array()) aat.fail("must be an array");
    const int64_t model_size = static_cast<int64_t>(t.model->vocab().size());
    int64_t max_added = -1;
    for (size_t i = 0; i < arr->size(); ++i) {
      const JsonPath eat = aat.index(i);
      const Json& e = (*arr)[i];
      tok::AddedToken a;
      int64_t id = tok::get_int(e, "id", eat);
      if (id < 0 || id > tok::kMaxTokenId) eat.child("id").fail(std::to_string(id) + " is out of range");
      a.content = tok::get_string(e, "content", eat);
      a.single_word = tok::opt_bool(e, "single_word", false, eat);
      a.lstrip = tok::opt_bool(e, "lstrip", false, eat);
      a.rstrip = tok::opt_bool(e, "rstrip", false, eat);
      a.special = tok::opt_bool(e, "special", false, eat);
      a.normalized = tok::opt_bool(e, "normalized", !a.special, eat);
      if (a.content.empty()) continue;
      int64_t new_id;
      if (auto f = t.added_vocab.find(a.content); f != t.added_vocab.end()) new_id = f->second;
      else if (auto g = t.model->vocab().find(a.content); g != t.model->vocab().end()) new_id = g->second;
      else if (max_added < 0) new_id = model_size;
      else new_id = (max_added >= model_size || model_size == 0) ? max_added + 1 : model_size;
      if (new_id > tok::kMaxTokenId) eat.child("id").fail("is out of range");
      a.id = static_cast<int32_t>(new_id);
      max_added = std::max(max_added, new_id);
      t.added_vocab[a.content] = a.id;
      added.push_back(a);
    }
  }
  return added;
}

// The id -> token table over the model's vocabulary and the added tokens, and the matchers that
// find added tokens in text.
void build_id_table(const std::vector<tok::AddedToken>& added, tok::HfTokenizer& t) {
  int64_t max_id = -1;
  for (const auto& [tokstr, id] : t.model->vocab()) max_id = std::max<int64_t>(max_id, id);
  for (const auto& a : added) max_id = std::max<int64_t>(max_id, a.id);
  t.id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  t.has_token_.assign(static_cast<size_t>(max_id + 1), 0);
  t.special_.assign(static_cast<size_t>(max_id + 1), 0);
  for (const auto& [tokstr, id] : t.model->vocab()) {
    t.id_to_token_[id] = tokstr;
    t.has_token_[id] = 1;
  }
  for (const auto& a : added) {
    t.has_token_[a.id] = 1;
    if (a.special) t.special_[a.id] = 1;
    if (a.normalized) {
      // As HF: searched for, and decoded as, its normalized text.
      std::string pattern = t.normalizer ? t.normalizer->normalize(a.content) : a.content;
      t.id_to_token_[a.id] = pattern;
      t.normalized_matcher.add(std::move(pattern), a);
    } else {
      t.id_to_token_[a.id] = a.content;
      t.raw_matcher.add(a.content, a);
    }
  }
}

std::unique_ptr<Tokenizer> build(const Json& root, const std::string& label) {
  const JsonPath top{&label, ""};
  if (!root.is_object()) top.fail("the top level must be a JSON object");
  auto t = std::make_unique<tok::HfTokenizer>();

  // model
  const Json& model = tok::require(root, "model", top);
  const JsonPath mat = top.child("model");
  std::string type;
  if (auto ty = tok::opt_string(model, "type", mat)) type = *ty;
  else if (tok::member(model, "merges", mat)) type = "BPE";
  else mat.child("type").fail("is missing");
  if (type != "BPE") mat.child("type").fail("\"" + type + "\" is not supported (only BPE)");
  t->model = std::make_unique<tok::BpeModel>(tok::BpeModel::from_json(model, mat));

  if (const Json* v = tok::member(root, "normalizer", top)) t->normalizer = tok::make_normalizer(*v, top.child("normalizer"));
  if (const Json* v = tok::member(root, "pre_tokenizer", top))
    t->pre_tokenizer = tok::make_pre_tokenizer(*v, top.child("pre_tokenizer"));
  if (const Json* v = tok::member(root, "post_processor", top))
    t->post_processor = tok::make_post_processor(*v, top.child("post_processor"));
  if (const Json* v = tok::member(root, "decoder", top)) t->decoder = tok::make_decoder(*v, top.child("decoder"));

  const std::vector<tok::AddedToken> added = read_added_tokens(root, top, *t);
  build_id_table(added, *t);
  return t;
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_json_text(std::string_view json_text, const std::string& label) {
  Json root;
  try {
    root = Json::parse(json_text.begin(), json_text.end());
  } catch (const Json::exception& e) {
    throw Error(label + ": invalid JSON: " + e.what());
  }
  try {
    return build(root, label);
  } catch (const Json::exception& e) {  // defensive: a type check this reader missed
    throw Error(label + ": unexpected value: " + e.what());
  }
}

std::unique_ptr<Tokenizer> Tokenizer::load(const std::filesystem::path& tokenizer_json) {
  const std::string label = tokenizer_json.string();
  ReadFailure why{};
  std::optional<std::string> text = try_read_text(tokenizer_json, &why);
  if (!text)
    throw Error(label + (why == ReadFailure::kCannotOpen ? ": cannot open the tokenizer file" : ": cannot read the tokenizer file"));
  return from_json_text(*text, label);
}

}  // namespace tpbatch

// A deterministic Llama-2 style tokenizer for synthetic models.
#include "tools/make_tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace tpbatch {
namespace {

const char* const kSpace = "\xe2\x96\x81";  // "▁"

// Characters in the order they get a piece (most frequent in English text first).
const char* const kCharOrder =
    "etaoinshrdlcumwfgypbvkjxqz"
    "TAISHWOBMCDEFGJKLNPQRUVXYZ"
    ".,'\"!?-:;0123456789()"
    "#$%&*+/<=>@[\\]^_`{|}~";
const char* const kLetterOrder = "etaoinshrdlcumwfgypbvkjxqz";

// The text the merges are learned from (TinyStories-like, so stories prompts tokenize naturally).
const char* const kCorpus =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun with her "
    "friends. One day, she saw a big red ball in the park. She wanted to play with it, but it was not hers. "
    "Lily went to her mom and said, \"Mom, can I play with the ball?\" Her mom smiled and said, \"Yes, but you "
    "have to share it with the other kids.\" Lily was happy and ran back to the park. She gave the ball to a "
    "boy named Tom and they played together all day. The sun was warm and the sky was blue. They laughed and "
    "had a lot of fun. When it was time to go home, Tom said, \"Thank you for sharing the ball with me.\" Lily "
    "felt very good. She learned that sharing makes everyone happy. The next day, Lily and Tom went to the "
    "park again. They found a small dog under a tree. The dog was sad because it was lost. Lily and Tom looked "
    "for the owner of the dog. They asked a man and a woman if they knew the dog. The woman said, \"That is my "
    "dog! Thank you so much for finding him.\" She was so happy that she gave them a big hug. Lily and Tom were "
    "proud of what they did. They wanted to help more animals and people. From that day on, they were best "
    "friends and they always helped each other. It was the best time of their life, and they never forgot "
    "the little lost dog that made them friends forever. The end. Once there was a boy who liked to read books "
    "about the moon and the stars. He would look up at the night sky and think about flying in a rocket. His "
    "dad said he could be anything he wanted to be if he worked hard and never gave up.";

struct Word {
  std::vector<std::string> symbols;
  int64_t count = 0;
};

// The pieces so far (no duplicates, at most `size` of them) and the merges that make them.
struct VocabBuilder {
  int64_t size = 0;
  SyntheticVocab v;
  std::unordered_set<std::string> have;
  bool add(const std::string& piece) {
    if (int64_t(v.pieces.size()) >= size || have.count(piece)) return false;
    v.pieces.push_back(piece);
    have.insert(piece);
    return true;
  }
  bool full() const { return int64_t(v.pieces.size()) >= size; }
};

// The words of the built-in text with their counts, each as "▁" and its letters (words with a
// letter that has no piece left out).
std::vector<Word> corpus_words(const VocabBuilder& vb) {
  std::map<std::string, int64_t> word_counts;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) ++word_counts[cur];
    cur.clear();
  };
  for (const char* p = kCorpus; *p; ++p) {
    char ch = *p;
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) cur += ch;
    else flush();
  }
  flush();
  std::vector<Word> words;
  for (const auto& [w, n] : word_counts) {
    Word word;
    word.count = n;
    word.symbols.push_back(kSpace);
    bool ok = true;
    for (char ch : w) {
      std::string s(1, ch);
      ok = ok && vb.have.count(s);
      word.symbols.push_back(s);
    }
    if (ok) words.push_back(std::move(word));
  }
  return words;
}

// BPE learned on the built-in text (pairs of known pieces only) until the vocabulary is full or no
// pair is left.
void learn_merges(VocabBuilder& vb, std::vector<Word>& words) {
  while (!vb.full()) {
    std::map<std::pair<std::string, std::string>, int64_t> pairs;
    for (const Word& w : words)
      for (size_t i = 0; i + 1 < w.symbols.size(); ++i) pairs[{w.symbols[i], w.symbols[i + 1]}] += w.count;
    if (pairs.empty()) break;
    // Most frequent pair; ties go to the first in (a, b) order, so the result never varies.
    auto best = pairs.begin();
    for (auto it = pairs.begin(); it != pairs.end(); ++it)
      if (it->second > best->second) best = it;
    const auto [a, b] = best->first;
    const std::string merged = a + b;
    for (Word& w : words) {
      std::vector<std::string> out;
      out.reserve(w.symbols.size());
      for (size_t i = 0; i < w.symbols.size(); ++i) {
        if (i + 1 < w.symbols.size() && w.symbols[i] == a && w.symbols[i + 1] == b) {
          out.push_back(merged);
          ++i;
        } else {
          out.push_back(w.symbols[i]);
        }
      }
      w.symbols = std::move(out);
    }
    if (vb.add(merged) || vb.have.count(merged)) vb.v.merges.emplace_back(a, b);
  }
}

// Letter extensions of word-like pieces ("▁" + lowercase letters, or lowercase letters), breadth
// first in id order, until the vocabulary is full.
void extend_with_letters(VocabBuilder& vb) {
  auto wordlike = [&](const std::string& p) {
    size_t i = p.rfind(kSpace, 0) == 0 ? 3 : 0;
    if (i == 0 && p.empty()) return false;
    for (; i < p.size(); ++i)
      if (p[i] < 'a' || p[i] > 'z') return false;
    return true;
  };
  std::vector<std::string> queue;
  for (size_t id = 259; id < vb.v.pieces.size(); ++id)
    if (wordlike(vb.v.pieces[id])) queue.push_back(vb.v.pieces[id]);
  std::vector<std::string> letters;
  for (const char* c = kLetterOrder; *c; ++c)
    if (vb.have.count(std::string(1, *c))) letters.emplace_back(1, *c);
  for (size_t qi = 0; qi < queue.size() && !vb.full() && !letters.empty(); ++qi) {
    const std::string base = queue[qi];  // copy: queue grows below
    for (const std::string& c : letters) {
      if (vb.full()) break;
      if (vb.add(base + c)) {
        vb.v.merges.emplace_back(base, c);
        queue.push_back(base + c);
      }
    }
  }
}

}  // namespace

SyntheticVocab build_synthetic_vocab(int64_t vocab_size) {
  if (vocab_size < 260)
    throw Error("make-model: vocab_size " + std::to_string(vocab_size) +
                " is too small for the Llama-2 tokenizer layout (3 special tokens + 256 byte tokens + \"▁\" need at least 260)");
  VocabBuilder vb;
  vb.size = vocab_size;
  vb.add("<unk>");
  vb.add("<s>");
  vb.add("</s>");
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    vb.add(buf);
  }
  vb.add(kSpace);
  for (const char* c = kCharOrder; *c; ++c) vb.add(std::string(1, *c));
  std::vector<Word> words = corpus_words(vb);
  learn_merges(vb, words);
  extend_with_letters(vb);
  if (!vb.full())
    throw Error("make-model: could not build " + std::to_string(vocab_size) + " vocabulary pieces");
  return vb.v;
}

std::string make_tokenizer_json(int64_t vocab_size) {
  using nlohmann::ordered_json;
  const SyntheticVocab v = build_synthetic_vocab(vocab_size);
  ordered_json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  ordered_json added = ordered_json::array();
  for (int id = 0; id < 3; ++id) {
    ordered_json t;
    t["id"] = id;
    t["content"] = v.pieces[size_t(id)];
    t["single_word"] = false;
    t["lstrip"] = false;
    t["rstrip"] = false;
    t["normalized"] = false;
    t["special"] = true;
    added.push_back(t);
  }
  j["added_tokens"] = added;
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers",
                      ordered_json::array({ordered_json{{"type", "Prepend"}, {"prepend", kSpace}},
                                           ordered_json{{"type", "Replace"},
                                                        {"pattern", ordered_json{{"String", " "}}},
                                                        {"content", kSpace}}})}};
  j["pre_tokenizer"] = nullptr;
  auto special = [](const char* id, int type_id) {
    return ordered_json{{"SpecialToken", ordered_json{{"id", id}, {"type_id", type_id}}}};
  };
  auto sequence = [](const char* id, int type_id) {
    return ordered_json{{"Sequence", ordered_json{{"id", id}, {"type_id", type_id}}}};
  };
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", ordered_json::array({special("<s>", 0), sequence("A", 0)})},
      {"pair", ordered_json::array({special("<s>", 0), sequence("A", 0), special("<s>", 1), sequence("B", 1)})},
      {"special_tokens",
       ordered_json{{"<s>", ordered_json{{"id", "<s>"}, {"ids", ordered_json::array({1})}, {"tokens", ordered_json::array({"<s>"})}}}}}};
  j["decoder"] = {
      {"type", "Sequence"},
      {"decoders", ordered_json::array({ordered_json{{"type", "Replace"}, {"pattern", ordered_json{{"String", kSpace}}}, {"content", " "}},
                                        ordered_json{{"type", "ByteFallback"}}, ordered_json{{"type", "Fuse"}},
                                        ordered_json{{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}};
  ordered_json model;
  model["type"] = "BPE";
  model["dropout"] = nullptr;
  model["unk_token"] = "<unk>";
  model["continuing_subword_prefix"] = nullptr;
  model["end_of_word_suffix"] = nullptr;
  model["fuse_unk"] = true;
  model["byte_fallback"] = true;
  ordered_json vocab = ordered_json::object();
  {
    // Pieces are unique: append straight to the ordered map's vector (operator[] searches linearly).
    auto& obj = vocab.get_ref<ordered_json::object_t&>();
    obj.reserve(v.pieces.size());
    for (size_t id = 0; id < v.pieces.size(); ++id) obj.emplace_back(v.pieces[id], ordered_json(int64_t(id)));
  }
  model["vocab"] = std::move(vocab);
  ordered_json merges = ordered_json::array();
  for (const auto& [a, b] : v.merges) merges.push_back(a + " " + b);
  model["merges"] = std::move(merges);
  j["model"] = std::move(model);
  return j.dump(2) + "\n";
}

std::string make_tokenizer_config_json(int64_t model_max_length) {
  using nlohmann::ordered_json;
  ordered_json j;
  j["add_bos_token"] = true;
  j["add_eos_token"] = false;
  ordered_json decoder;
  const char* names[3] = {"<unk>", "<s>", "</s>"};
  for (int id = 0; id < 3; ++id)
    decoder[std::to_string(id)] = {{"content", names[id]}, {"lstrip", false}, {"normalized", false},
                                   {"rstrip", false}, {"single_word", false}, {"special", true}};
  j["added_tokens_decoder"] = decoder;
  j["bos_token"] = "<s>";
  j["eos_token"] = "</s>";
  j["unk_token"] = "<unk>";
  j["pad_token"] = nullptr;
  j["clean_up_tokenization_spaces"] = false;
  j["legacy"] = true;
  j["model_max_length"] = model_max_length;
  j["sp_model_kwargs"] = ordered_json::object();
  j["spaces_between_special_tokens"] = false;
  j["tokenizer_class"] = "LlamaTokenizer";
  j["use_default_system_prompt"] = false;
  return j.dump(2) + "\n";
}

}  // namespace tpbatch

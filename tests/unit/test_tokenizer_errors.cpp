// Bad tokenizer.json files give tpbatch::Error naming the problem; odd input text never crashes.
#include <gtest/gtest.h>

#include <random>

#include "common/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace tpbatch {
namespace {

// A tiny byte-level BPE tokenizer: vocab a b c ab abc, merges "a b", "ab c".
nlohmann::json tiny() {
  return nlohmann::json::parse(R"({
    "version": "1.0", "added_tokens": [
      {"id": 5, "content": "<|end|>", "single_word": false, "lstrip": false, "rstrip": false,
       "normalized": false, "special": true}],
    "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
    "post_processor": null,
    "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
              "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
              "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4},
              "merges": ["a b", "ab c"]}})");
}

std::string error_of(const std::string& text) {
  try {
    Tokenizer::from_json_text(text, "tokenizer.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitFailure);
    return e.what();
  }
  return "<no error>";
}

TEST(TokenizerErrors, TinyTokenizerLoadsAndMerges) {
  auto tok = Tokenizer::from_json_text(tiny().dump(), "tiny");
  EXPECT_EQ(tok->encode("abcab<|end|>", false), (std::vector<int32_t>{4, 3, 5}));
  EXPECT_EQ(tok->vocab_size(), 6);
}

TEST(TokenizerErrors, MalformedJsonNamesTheFile) {
  const std::string msg = error_of("{\"model\": ");
  EXPECT_NE(msg.find("tokenizer.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("invalid JSON"), std::string::npos) << msg;
}

TEST(TokenizerErrors, UnknownModelTypeIsNamed) {
  auto j = tiny();
  j["model"]["type"] = "WordPiece";
  const std::string msg = error_of(j.dump());
  EXPECT_NE(msg.find("model.type \"WordPiece\" is not supported"), std::string::npos) << msg;
}

TEST(TokenizerErrors, MergeNamingUnknownTokenIsNamed) {
  auto j = tiny();
  j["model"]["merges"] = {"a b", "ab zz"};
  const std::string msg = error_of(j.dump());
  EXPECT_NE(msg.find("merges[1] names token \"zz\" not in vocab"), std::string::npos) << msg;
}

TEST(TokenizerErrors, UnknownComponentTypesAreNamed) {
  for (const char* key : {"normalizer", "pre_tokenizer", "post_processor", "decoder"}) {
    auto j = tiny();
    j[key] = {{"type", "Frobnicate"}};
    const std::string msg = error_of(j.dump());
    EXPECT_NE(msg.find(std::string(key) + ".type \"Frobnicate\""), std::string::npos) << msg;
  }
}

TEST(TokenizerErrors, WrongValueTypesAreErrorsNotCrashes) {
  const char* bad[] = {
      "[]", "null", "{}", R"({"model": 3})", R"({"model": {"type": "BPE", "vocab": []}})",
      R"({"model": {"type": "BPE", "vocab": {"a": "x"}}})", R"({"model": {"type": "BPE", "vocab": {"a": -1}}})",
      R"({"model": {"type": "BPE", "vocab": {"a": 99999999999}}})",
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [3]}})",
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["ab"]}})",
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "unk_token": "<unk>"}})",
      R"({"model": {"type": "BPE", "vocab": {"a": 0}}, "added_tokens": [{"id": "x"}]})",
      R"({"model": {"type": "BPE", "vocab": {"a": 0}}, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(("}, "behavior": "Isolated"}})",
      R"({"model": {"type": "BPE", "vocab": {"a": 0}}, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Sideways"}})",
      R"({"model": {"type": "BPE", "vocab": {"a": 0}}, "decoder": {"type": "Strip", "content": "ab"}})",
      R"({"model": {"type": "BPE", "vocab": {"a": 0}}, "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>"}}]}})",
      R"({"model": {"type": "BPE", "vocab": {"a": 0}}, "normalizer": {"type": "Sequence", "normalizers": {}}})",
  };
  for (const char* text : bad) {
    const std::string msg = error_of(text);
    EXPECT_NE(msg, "<no error>") << text;
    EXPECT_EQ(msg.rfind("tokenizer.json: ", 0), 0u) << msg;
  }
}

TEST(TokenizerErrors, DeeplyNestedComponentsAreAnErrorNotAStackOverflow) {
  std::string n = R"({"type": "NFC"})";
  std::string open, close;
  for (int k = 0; k < 100000; ++k) {
    open += R"({"type": "Sequence", "normalizers": [)";
    close += "]}";
  }
  std::string j = tiny().dump();
  j.pop_back();  // the closing brace
  j += R"(, "normalizer": )" + open + n + close + "}";
  const std::string msg = error_of(j);
  EXPECT_NE(msg.find("too deeply"), std::string::npos) << msg.substr(0, 200);
}

TEST(TokenizerErrors, LoadOfMissingFileNamesIt) {
  try {
    Tokenizer::load("/nonexistent/dir/tokenizer.json");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/tokenizer.json"), std::string::npos);
  }
}

TEST(TokenizerErrors, RandomBytesNeverCrashEncodeOrDecode) {
  std::vector<std::unique_ptr<Tokenizer>> toks;
  toks.push_back(Tokenizer::from_json_text(tiny().dump(), "tiny"));
  for (const char* folder : {"llama-spm", "gpt-2", "gpt2-vocab-llama3-pretok", "gpt2-vocab-qwen2-pretok"}) {
    const auto file = test::tokenizers_dir() / folder / "tokenizer.json";
    toks.push_back(Tokenizer::load(file));
  }
  std::mt19937 rng(1234);
  const std::string alphabet[] = {"a", " ", "\n", "\xFF", "\xC3", "\x80", "\xE4\xB8\xAD", "<s>", "<|endoftext|>",
                                  "'s", "1", "\xF0\x9F\xA6\x99", "\xCC\x81", "\t", "\xE2\x96\x81", "<0x41>"};
  for (int round = 0; round < 300; ++round) {
    std::string text;
    const int n = rng() % 40;
    for (int k = 0; k < n; ++k) {
      if (rng() % 3 == 0) text.push_back(static_cast<char>(rng() % 256));
      else text += alphabet[rng() % std::size(alphabet)];
    }
    for (const auto& tok : toks) {
      const auto ids = tok->encode(text, round % 2 == 0);
      for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok->vocab_size());
      const std::string back = tok->decode(ids);
      std::vector<int32_t> junk = ids;
      junk.push_back(-5);
      junk.push_back(1 << 30);
      EXPECT_EQ(tok->decode(junk), back);  // ids outside the vocabulary are skipped
    }
  }
}

TEST(TokenizerErrors, InvalidUtf8ByteLevelRoundTripsBytes) {
  const auto file = test::tokenizers_dir() / "gpt-2" / "tokenizer.json";
  if (!std::filesystem::exists(file)) GTEST_FAIL() << file << " is missing from the clone";
  auto tok = Tokenizer::load(file);
  const std::string text = "ok \xFF\xFE bytes \xC3";
  const auto ids = tok->encode(text, false);
  EXPECT_FALSE(ids.empty());
  EXPECT_EQ(tok->decode(ids), "ok \xEF\xBF\xBD\xEF\xBF\xBD bytes \xEF\xBF\xBD");  // lossy, as HF decode
}

}  // namespace
}  // namespace tpbatch

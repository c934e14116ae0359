// The chat-template renderer (src/chat/): Jinja semantics the real templates rely on, and errors
// that name the unsupported construct and where it is. Byte equality with jinja2 on the real
// templates is tests/e2e/test_chat_templates_match_jinja2.sh.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "chat/chat_template.h"
#include "common/error.h"

using namespace tpbatch::chat;

namespace {

std::string render(const std::string& tmpl, const std::string& messages = R"([{"role": "user", "content": "hi"}])",
                   bool gen = true) {
  return ChatTemplate(tmpl, "<s>", "</s>", "test").render(nlohmann::ordered_json::parse(messages), gen);
}

std::string error_of(const std::string& tmpl, const std::string& messages = R"([{"role": "user", "content": "hi"}])") {
  try {
    render(tmpl, messages);
  } catch (const TemplateError& e) {
    return e.what();
  }
  ADD_FAILURE() << "rendered: " << tmpl;
  return "";
}

const char* kThree = R"([{"role": "system", "content": " S "}, {"role": "user", "content": "U"},
                         {"role": "assistant", "content": "A"}])";

}  // namespace

TEST(ChatTemplate, LoopVariablesAndSlicing) {
  EXPECT_EQ(render("{% for m in messages[1:] %}{{ loop.index0 }}{{ m.role[0] }}{% if loop.first %}F{% endif %}"
                   "{% if loop.last %}L{% endif %}{% endfor %}",
                   kThree),
            "0uF1aL");
  EXPECT_EQ(render("{{ messages[-1]['content'] }}{{ messages | length }}{{ 'abc'[::-1] }}", kThree), "A3cba");
}

TEST(ChatTemplate, ExpressionsAsPython) {
  EXPECT_EQ(render("{{ bos_token ~ 1 ~ none }}|{{ 'a' + 'b' }}|{{ 7 // 2 }}{{ -7 % 3 }}|{{ 'x' in 'xyz' }}|"
                   "{{ missing is defined }}{{ none is none }}{{ 'a' is string }}|{{ missing | default('d') }}|"
                   "{{ '  t  ' | trim | upper }}|{{ {'k': [1, 2.5, none, true]} | tojson }}|{{ 1 if false else 2 }}"),
            "<s>1None|ab|32|True|FalseTrueTrue|d|T|{\"k\": [1, 2.5, null, true]}|2");
}

TEST(ChatTemplate, SetScopesAndNamespace) {
  // A set inside a loop does not leak out; a namespace attribute does.
  EXPECT_EQ(render("{% set x = 1 %}{% set ns = namespace(n=0) %}{% for m in messages %}{% set x = 2 %}"
                   "{% set ns.n = ns.n + 1 %}{% endfor %}{{ x }}{{ ns.n }}",
                   kThree),
            "13");
}

TEST(ChatTemplate, WhitespaceControlAsHuggingFace) {
  // trim_blocks drops the newline after a block tag, lstrip_blocks the indentation before it,
  // "-" strips all whitespace on its side; {{ }} keeps both.
  EXPECT_EQ(render("{% if true %}\n    A\n    {% endif %}\n{{ 'B' }}\n  {%- if true %} C {% endif -%}  \n D\n"), "    A\nB C D");
}

TEST(ChatTemplate, GenerationPromptAndTokens) {
  const std::string t = "{{ bos_token }}{% if add_generation_prompt %}G{% endif %}{{ eos_token }}";
  EXPECT_EQ(render(t, R"([])", true), "<s>G</s>");
  EXPECT_EQ(render(t, R"([])", false), "<s></s>");
}

TEST(ChatTemplate, RaiseExceptionCarriesTheTemplatesMessage) {
  try {
    render("{{ raise_exception('roles must alternate') }}");
    FAIL();
  } catch (const RaisedException& e) {
    EXPECT_STREQ(e.what(), "roles must alternate");
  }
}

TEST(ChatTemplate, UnsupportedConstructsAreNamedWithTheirPosition) {
  EXPECT_EQ(error_of("ab\n  {{ messages | wordcount }}"), "chat template line 2 column 15: unsupported filter 'wordcount'");
  EXPECT_EQ(error_of("{% macro f() %}{% endmacro %}"), "chat template line 1 column 1: unsupported statement {% macro %}");
  EXPECT_EQ(error_of("x{% if messages is callable %}{% endif %}"), "chat template line 1 column 17: unsupported test 'is callable'");
  EXPECT_EQ(error_of("{{ cycler(1) }}"), "chat template line 1 column 4: unsupported function 'cycler()'");
  EXPECT_EQ(error_of("{% for m in messages %}"), "chat template line 1 column 1: the template ends before {% else %} or {% endfor %}");
  EXPECT_EQ(error_of("{{ 'a' "), "chat template line 1 column 1: {{ is never closed");
  EXPECT_EQ(error_of("{{ nothing.here }}"), "chat template line 1 column 11: 'nothing' is undefined (reading .here)");
  // An unsupported filter in a branch that is not taken is harmless (as in Jinja, names are
  // only looked up when used).
  EXPECT_EQ(render("{% if false %}{{ x | wordcount }}{% endif %}ok"), "ok");
}

// The lexer's errors and the closing tags' checks take the same "chat template <position>: " form.
TEST(ChatTemplate, LexerAndClosingTagErrorsNameTheirPosition) {
  EXPECT_EQ(error_of("a{# note"), "chat template line 1 column 2: unclosed comment {#");
  EXPECT_EQ(error_of("{{ 'a }}"), "chat template line 1 column 4: unterminated string");
  EXPECT_EQ(error_of("{{ 1 ; 2 }}"), "chat template line 1 column 6: unexpected character ';'");
  EXPECT_EQ(error_of("{% if true %}a{% else x %}b{% endif %}"), "chat template line 1 column 23: unexpected 'x' in {% else %}");
  EXPECT_EQ(error_of("{% if true %}a{% endif x %}"), "chat template line 1 column 24: unexpected 'x' in {% endif %}");
  EXPECT_EQ(error_of("{% for m in messages %}a{% else %}b{% endfor 1 %}"),
            "chat template line 1 column 46: unexpected the number 1 in {% endfor %}");
}

TEST(ChatTemplate, LoadsFromTokenizerConfig) {
  const auto dir = std::filesystem::temp_directory_path() / ("tpbatch_chat_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer_config.json")
      << R"({"bos_token": {"content": "<|b|>", "__type": "AddedToken"}, "eos_token": "<|e|>",
             "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "{{ bos_token }}D"}]})";
  const ChatTemplate t = ChatTemplate::load(dir, "");
  EXPECT_EQ(t.bos_token(), "<|b|>");
  EXPECT_EQ(t.eos_token(), "<|e|>");
  EXPECT_EQ(t.render(nlohmann::ordered_json::array()), "<|b|>D");
  std::ofstream(dir / "tokenizer_config.json") << R"({"bos_token": "<s>"})";
  try {
    ChatTemplate::load(dir, "");
    ADD_FAILURE();
  } catch (const tpbatch::Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no chat_template"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

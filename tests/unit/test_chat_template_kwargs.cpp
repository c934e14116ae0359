// chat_template_kwargs: the job key (typed YAML read as JSON, kept typed in the effective job and
// compared on resume), a row's own object laid over the job's, and the template rendering them.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "temp_dir_test.h"
#include "chat/chat_template.h"
#include "common/error.h"
#include "io/resume_check.h"
#include "job/chat_template_kwargs.h"
#include "job/job_spec.h"

namespace fs = std::filesystem;
using namespace tpbatch;

namespace {

class ChatTemplateKwargsJob : public tpbatch::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    fs::create_directories(dir_ / "m");
    std::ofstream(dir_ / "in.jsonl") << "{\"prompt\": \"x\"}\n";
  }

  JobSpec parse(const std::string& extra, const std::vector<std::string>& ov = {}) {
    return parse_job("model: m\ninput:\n  path: in.jsonl\n" + extra, ov, dir_);
  }
  std::string error_of(const std::string& extra) {
    try {
      parse(extra);
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "accepted: " << extra;
    return "";
  }

};

}  // namespace

TEST_F(ChatTemplateKwargsJob, PlainScalarsAreTypedAsJsonAndQuotedOnesAreStrings) {
  const JobSpec j = parse(
      "chat_template_kwargs:\n  enable_thinking: false\n  as_text: \"false\"\n  n: 3\n  p: 0.5\n  none: ~\n"
      "  name: Ada\n  tools: [a, 1]\n  nested: {k: true}\n");
  EXPECT_EQ(j.chat_template_kwargs,
            R"({"enable_thinking":false,"as_text":"false","n":3,"p":0.5,"none":null,"name":"Ada","tools":["a",1],)"
            R"("nested":{"k":true}})");
}

TEST_F(ChatTemplateKwargsJob, AbsentOrEmptyMeansNoneAndIsNotInTheEffectiveJob) {
  EXPECT_EQ(parse("").chat_template_kwargs, "");
  EXPECT_EQ(parse("chat_template_kwargs: {}\n").chat_template_kwargs, "");
  EXPECT_EQ(parse("").effective_yaml.find("chat_template_kwargs"), std::string::npos);
}

TEST_F(ChatTemplateKwargsJob, MustBeAMappingNamingTheKey) {
  EXPECT_NE(error_of("chat_template_kwargs: [1]\n").find("'chat_template_kwargs' must be a mapping of names to values, "
                                                         "got a list"),
            std::string::npos);
  EXPECT_NE(error_of("chat_template_kwargs: yes\n").find("'chat_template_kwargs' must be a mapping"),
            std::string::npos);
}

TEST_F(ChatTemplateKwargsJob, MessagesIsNotATemplateVariableItMaySet) {
  EXPECT_NE(error_of("chat_template_kwargs:\n  messages: []\n").find("'chat_template_kwargs.messages' is not allowed"),
            std::string::npos);
}

TEST_F(ChatTemplateKwargsJob, SetOverridesTheWholeMapping) {
  const JobSpec j = parse("chat_template_kwargs: {a: 1}\n", {"chat_template_kwargs={enable_thinking: false}"});
  EXPECT_EQ(j.chat_template_kwargs, R"({"enable_thinking":false})");
}

TEST_F(ChatTemplateKwargsJob, EffectiveJobParsesBackToTheSameTypedValues) {
  const JobSpec j = parse("chat_template_kwargs: {enable_thinking: false, as_text: 'false', x: 1.5, l: [\"a\"]}\n");
  EXPECT_NE(j.effective_yaml.find(R"(chat_template_kwargs: {"enable_thinking": false, "as_text": "false")"),
            std::string::npos)
      << j.effective_yaml;
  const JobSpec again = parse_job(j.effective_yaml, {}, dir_);
  EXPECT_EQ(again.chat_template_kwargs, j.chat_template_kwargs);
  EXPECT_EQ(again.effective_yaml, j.effective_yaml);
}

TEST_F(ChatTemplateKwargsJob, ResumeRefusesAChangedValueOrType) {
  const std::string off = parse("chat_template_kwargs: {enable_thinking: false}\n").effective_yaml;
  const std::string on = parse("chat_template_kwargs: {enable_thinking: true}\n").effective_yaml;
  const std::string text = parse("chat_template_kwargs: {enable_thinking: 'false'}\n").effective_yaml;
  const std::string none = parse("").effective_yaml;
  EXPECT_EQ(job_yaml_difference(off, off), "");
  EXPECT_EQ(job_yaml_difference(off, on),
            R"('chat_template_kwargs' is {"enable_thinking":false} there and {"enable_thinking":true} here)");
  EXPECT_NE(job_yaml_difference(off, text), "");
  EXPECT_NE(job_yaml_difference(none, off), "");
  EXPECT_NE(job_yaml_difference(off, none), "");
}

TEST(ChatTemplateKwargs, RowNamesReplaceTheJobsNameByName) {
  EXPECT_TRUE(merged_chat_template_kwargs("", std::nullopt).is_null());
  EXPECT_EQ(merged_chat_template_kwargs(R"({"a":1,"b":2})", std::nullopt).dump(), R"({"a":1,"b":2})");
  EXPECT_EQ(merged_chat_template_kwargs(R"({"a":1,"b":2})", R"({"b":3,"c":4})").dump(), R"({"a":1,"b":3,"c":4})");
  EXPECT_EQ(merged_chat_template_kwargs("", R"({"c":4})").dump(), R"({"c":4})");
}

TEST(ChatTemplateKwargs, BecomeTemplateVariables) {
  const chat::ChatTemplate t(
      "{% if add_generation_prompt %}A:{% if enable_thinking is defined and enable_thinking is false %}"
      "<think></think>{% endif %}{% endif %}{{ bos_token }}",
      "<s>", "</s>", "test");
  const auto msgs = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
  EXPECT_EQ(t.render(msgs, true), "A:<s>");
  EXPECT_EQ(t.render(msgs, true, {{"enable_thinking", false}}), "A:<think></think><s>");
  EXPECT_EQ(t.render(msgs, true, {{"enable_thinking", "false"}}), "A:<s>");  // a string is not false
  // As apply_chat_template's **kwargs, they may replace the variables the engine sets.
  EXPECT_EQ(t.render(msgs, true, {{"add_generation_prompt", false}, {"bos_token", "B"}}), "B");
}

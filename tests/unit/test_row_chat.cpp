// A chat row's messages and chat_template_kwargs, on plain rows and OpenAI chat bodies: content-part
// lists become the text vLLM gives the template, anything but text parts is an error row naming the
// part, and the row's kwargs are kept as written or refused naming the key.
#include <gtest/gtest.h>

#include "io/input_row.h"

using namespace tpbatch;

namespace {

JobSpec job(UnknownKeys unknown = UnknownKeys::kError) {
  JobSpec j;
  j.input.unknown_keys = unknown;
  return j;
}

InputRow row(std::string_view line) { return parse_input_row(line, 0, job(), 512); }

std::string bad(std::string_view line) {
  try {
    parse_input_row(line, 6, job(), 512);
  } catch (const BadLine& b) {
    return b.reason;
  }
  ADD_FAILURE() << "accepted: " << line;
  return "";
}

std::string chat_request(const std::string& body) {
  return R"({"custom_id": "c", "method": "POST", "url": "/v1/chat/completions", "body": )" + body + "}";
}

}  // namespace

TEST(RowChat, TextContentPartsAreJoinedWithNewlines) {
  const InputRow r = row(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
                                                                       {"type": "text", "text": "b"}]}]})");
  EXPECT_EQ(r.messages_json.value(), R"([{"role":"user","content":"a\nb"}])");
}

TEST(RowChat, ContentPartsOfAnOpenAiChatBodyAreJoinedToo) {
  const InputRow r = row(chat_request(R"({"messages": [{"role": "system", "content": "s"},
      {"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}], "name": "n"}]})"));
  EXPECT_EQ(r.messages_json.value(),
            R"([{"role":"system","content":"s"},{"role":"user","content":"x\ny","name":"n"}])");
}

TEST(RowChat, AnEmptyContentPartListIsAnEmptyContent) {
  EXPECT_EQ(row(R"({"messages": [{"role": "user", "content": []}]})").messages_json.value(),
            R"([{"role":"user","content":""}])");
}

TEST(RowChat, ANonTextContentPartIsAnErrorRowNamingItsType) {
  EXPECT_EQ(bad(chat_request(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "what is it?"},
      {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}]})")),
            "input line 7: 'messages[0].content[1]' is a content part of type 'image_url': only text parts are "
            "supported (the models this engine runs read text)");
}

TEST(RowChat, AMalformedContentPartIsAnErrorRowNamingIt) {
  EXPECT_EQ(bad(R"({"messages": [{"role": "user", "content": ["hi"]}]})"),
            R"(input line 7: 'messages[0].content[0]' must be a content part object ({"type": "text", "text": ...}))");
  EXPECT_EQ(bad(R"({"messages": [{"role": "user", "content": [{"text": "hi"}]}]})"),
            "input line 7: 'messages[0].content[0].type' must be a string");
  EXPECT_EQ(bad(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": 1}]}]})"),
            "input line 7: 'messages[0].content[0].text' must be a string");
  EXPECT_EQ(bad(R"({"messages": [{"role": "user"}]})"), "input line 7: 'messages[0].content' is missing");
}

TEST(RowChat, RowChatTemplateKwargsAreKeptAsWritten) {
  const InputRow r = row(R"({"messages": [{"role": "user", "content": "hi"}],
                             "chat_template_kwargs": {"enable_thinking": false, "a": {"z": 1, "b": 2}}})");
  EXPECT_EQ(r.chat_template_kwargs.value(), R"({"enable_thinking":false,"a":{"z":1,"b":2}})");
  EXPECT_FALSE(row(R"({"messages": [{"role": "user", "content": "hi"}]})").chat_template_kwargs.has_value());
}

TEST(RowChat, OpenAiChatBodyCarriesChatTemplateKwargs) {
  const InputRow r = row(chat_request(R"({"messages": [{"role": "user", "content": "hi"}],
                                          "chat_template_kwargs": {"enable_thinking": false}})"));
  EXPECT_EQ(r.chat_template_kwargs.value(), R"({"enable_thinking":false})");
}

TEST(RowChat, ChatTemplateKwargsThatAreNotAnObjectAreAnErrorRowNamingTheKey) {
  EXPECT_EQ(bad(R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": [1]})"),
            R"(input line 7: 'chat_template_kwargs' must be an object of template variables (such as )"
            R"({"enable_thinking": false}), got a list)");
  EXPECT_EQ(bad(chat_request(R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": "x"})")),
            R"(input line 7: 'chat_template_kwargs' must be an object of template variables (such as )"
            R"({"enable_thinking": false}), got "x")");
}

TEST(RowChat, ChatTemplateKwargsMayNotSetMessages) {
  EXPECT_EQ(bad(R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"messages": []}})"),
            "input line 7: 'chat_template_kwargs.messages' is not allowed: the template's messages are the row's");
}

TEST(RowChat, ChatTemplateKwargsWithoutMessagesIsAnErrorRow) {
  EXPECT_EQ(bad(R"({"prompt": "x", "chat_template_kwargs": {"enable_thinking": false}})"),
            "input line 7: 'chat_template_kwargs' is read only with 'messages' (the chat template renders them)");
}

TEST(RowChat, ChatTemplateKwargsOfACompletionsBodyIsAnUnknownKey) {
  const std::string msg = bad(R"({"custom_id": "c", "url": "/v1/completions",
                                  "body": {"prompt": "x", "chat_template_kwargs": {}}})");
  EXPECT_EQ(msg.rfind("input line 7: unknown key 'body.chat_template_kwargs'", 0), 0u) << msg;
}

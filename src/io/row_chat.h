#pragma once
// A chat row's part of an input line: its `messages` as the chat template reads them and its own
// `chat_template_kwargs`. OpenAI content-part lists become the text vLLM gives the template.
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "io/line_context.h"

namespace tpbatch {

struct RowChat {
  std::string messages_json;                 // a list of messages, each content a string, as JSON text
  std::optional<std::string> kwargs_json;    // the row's chat_template_kwargs object, as JSON text
};

// Reads `messages` and `chat_template_kwargs` of the line (of its body for an OpenAI request) again
// in the line's own key order: a template's tojson must see the dicts as written. A message is an
// object with a string role and a content that is a string or a list of content parts; a list of
// {"type": "text", "text": ...} parts is joined with "\n", as vLLM does for templates that take
// string content. Refuses the line (ctx.bad) naming the message, the part (another part type, such
// as image_url) or the kwargs problem.
RowChat read_row_chat(std::string_view line, bool openai, const LineContext& ctx);

// A message's content as the template's string: itself, or its text parts joined with "\n".
// `at` names the message ("messages[2]") in the reason ctx.bad gives.
std::string message_content_text(const nlohmann::ordered_json& content, const std::string& at,
                                 const LineContext& ctx);

}  // namespace tpbatch

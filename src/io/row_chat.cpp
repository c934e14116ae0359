#include "io/row_chat.h"

#include "job/chat_template_kwargs.h"

namespace tpbatch {

using ojson = nlohmann::ordered_json;

std::string message_content_text(const ojson& content, const std::string& at, const LineContext& ctx) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    ctx.bad("'" + at + ".content' must be a string or a list of content parts ({\"type\": \"text\", \"text\": ...})");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string part = at + ".content[" + std::to_string(i) + "]";
    const ojson& p = content[i];
    if (!p.is_object()) ctx.bad("'" + part + "' must be a content part object ({\"type\": \"text\", \"text\": ...})");
    const auto type = p.find("type");
    if (type == p.end() || !type->is_string()) ctx.bad("'" + part + ".type' must be a string");
    if (type->get<std::string>() != "text")
      ctx.bad("'" + part + "' is a content part of type '" + type->get<std::string>() +
              "': only text parts are supported (the models this engine runs read text)");
    const auto t = p.find("text");
    if (t == p.end() || !t->is_string()) ctx.bad("'" + part + ".text' must be a string");
    if (i > 0) text += '\n';  // vLLM's join for templates that take string content
    text += t->get<std::string>();
  }
  return text;
}

namespace {

// The messages list checked, each content as a string; other keys of a message are kept (chat
// templates may read them).
ojson template_messages(const ojson& m, const LineContext& ctx) {
  if (!m.is_array()) ctx.bad("'messages' must be a list of {\"role\", \"content\"} objects");
  if (m.empty()) ctx.bad("'messages' is empty");
  ojson out = m;
  for (size_t i = 0; i < m.size(); ++i) {
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m[i].is_object()) ctx.bad("'" + at + "' must be an object with 'role' and 'content'");
    auto role = m[i].find("role");
    if (role == m[i].end() || !role->is_string()) ctx.bad("'" + at + ".role' must be a string");
    auto content = m[i].find("content");
    if (content == m[i].end()) ctx.bad("'" + at + ".content' is missing");
    if (!content->is_string()) out[i]["content"] = message_content_text(*content, at, ctx);
  }
  return out;
}

}  // namespace

RowChat read_row_chat(std::string_view line, bool openai, const LineContext& ctx) {
  const ojson ordered = ojson::parse(line.begin(), line.end());
  const ojson& base = openai ? ordered.at("body") : ordered;
  RowChat chat;
  chat.messages_json = template_messages(base.at("messages"), ctx).dump();
  if (auto it = base.find("chat_template_kwargs"); it != base.end() && !it->is_null()) {
    if (const std::string why = chat_template_kwargs_problem(*it, "chat_template_kwargs"); !why.empty()) ctx.bad(why);
    chat.kwargs_json = it->dump();
  }
  return chat;
}

}  // namespace tpbatch

#include "chat/render_chat_command.h"

#include <cstdio>
#include <sstream>

#include "chat/chat_template.h"
#include "common/error.h"
#include "common/read_text.h"

namespace tpbatch {

int run_render_chat(const RenderChatOptions& o, std::ostream& out) {
  auto read = [](const std::string& path, const char* what) {
    std::optional<std::string> text = try_read_text(path);
    if (!text) throw JobError(std::string(what) + " '" + path + "' cannot be read");
    return std::move(*text);
  };
  const std::string source = read(o.template_file, "template file");
  nlohmann::ordered_json messages;
  try {
    messages = nlohmann::ordered_json::parse(read(o.messages_file, "messages file"));
  } catch (const nlohmann::json::exception& e) {
    throw JobError("messages file '" + o.messages_file + "': not valid JSON (" + e.what() + ")");
  }
  nlohmann::ordered_json kwargs;
  try {
    if (!o.chat_template_kwargs.empty()) kwargs = nlohmann::ordered_json::parse(o.chat_template_kwargs);
  } catch (const nlohmann::json::exception& e) {
    throw JobError(std::string("--chat-template-kwargs: not valid JSON (") + e.what() + ")");
  }
  if (!kwargs.is_null() && !kwargs.is_object()) throw JobError("--chat-template-kwargs must be a JSON object");
  try {
    const chat::ChatTemplate t(source, o.bos_token, o.eos_token, o.template_file);
    out << t.render(messages, !o.no_generation_prompt, kwargs);
    out.flush();
  } catch (const chat::RaisedException& e) {
    std::fprintf(stderr, "tpbatch: the template raised: %s\n", e.what());
    return kExitFailure;
  } catch (const chat::TemplateError& e) {
    std::fprintf(stderr, "tpbatch: error: %s: %s\n", o.template_file.c_str(), e.what());
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace tpbatch

#pragma once
// `tpbatch render-chat --template FILE --messages FILE.json [--bos-token T] [--eos-token T]
// [--no-generation-prompt] [--chat-template-kwargs JSON]`: prints a chat template's rendering of
// a message list, byte for byte (no newline added), as a row's prompt would be. For checking
// templates against jinja2.
#include <ostream>
#include <string>

namespace tpbatch {

struct RenderChatOptions {
  std::string template_file;
  std::string messages_file;
  std::string bos_token;
  std::string eos_token;
  bool no_generation_prompt = false;
  std::string chat_template_kwargs;  // a JSON object of further template variables; empty = none
};

// Returns the exit code: 0, or 1 when the template raises or cannot render (message on stderr).
int run_render_chat(const RenderChatOptions& o, std::ostream& out);

}  // namespace tpbatch

// `tpbatch render-chat --template FILE --messages FILE.json ...`: chat/render_chat_command.h
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include "app/subcommands.h"
#include "chat/render_chat_command.h"

namespace tpbatch {

Subcommand add_render_chat_subcommand(CLI::App& program) {
  auto rc = std::make_shared<RenderChatOptions>();
  auto* cmd = program.add_subcommand("render-chat", "print a chat template's rendering of a message list");
  cmd->add_option("--template", rc->template_file, "Jinja chat template file")->required();
  cmd->add_option("--messages", rc->messages_file, "JSON list of {role, content} messages")->required();
  cmd->add_option("--bos-token", rc->bos_token, "the template's bos_token");
  cmd->add_option("--eos-token", rc->eos_token, "the template's eos_token");
  cmd->add_flag("--no-generation-prompt", rc->no_generation_prompt, "add_generation_prompt off");
  cmd->add_option("--chat-template-kwargs", rc->chat_template_kwargs,
                  "JSON object of further template variables, e.g. '{\"enable_thinking\": false}'");
  return {cmd, [rc] { return run_render_chat(*rc, std::cout); }};
}

}  // namespace tpbatch

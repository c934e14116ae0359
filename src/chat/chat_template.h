#pragma once
// A model's chat template: the Jinja text from tokenizer_config.json's `chat_template` (or a
// file the job names), with the bos_token / eos_token the template refers to. Rendering a row's
// `messages` gives the prompt text, with add_generation_prompt on, as Hugging Face's
// apply_chat_template(messages, tokenize=False, add_generation_prompt=True) does. The template
// is parsed once; every rendering is independent. strftime_now is not defined (a template that
// asks for today's date falls back to its fixed one), so prompts never depend on the day.
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/parser.h"

namespace tpbatch::chat {

class ChatTemplate {
 public:
  // `origin` names where the text came from, for messages.
  ChatTemplate(const std::string& source, std::string bos_token, std::string eos_token, std::string origin);

  // The model folder's tokenizer_config.json, or (template_file non-empty) that file's text with
  // the folder's bos/eos tokens. Throws tpbatch::Error naming the file: missing, not JSON, no
  // chat_template, or a template that does not parse.
  static ChatTemplate load(const std::filesystem::path& model_dir, const std::string& template_file);

  // Throws TemplateError (or RaisedException for the template's raise_exception) on failure.
  // `kwargs` (a JSON object, or null) are further variables, as apply_chat_template's **kwargs:
  // they may replace add_generation_prompt, bos_token and eos_token, never messages.
  std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt = true,
                     const nlohmann::ordered_json& kwargs = nullptr) const;

  const std::string& bos_token() const { return bos_; }
  const std::string& eos_token() const { return eos_; }
  const std::string& origin() const { return origin_; }
  const std::string& source() const { return source_; }  // the template's text

 private:
  std::shared_ptr<const Template> tmpl_;
  std::string bos_, eos_, origin_, source_;
};

}  // namespace tpbatch::chat

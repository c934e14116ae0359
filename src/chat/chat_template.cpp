#include "chat/chat_template.h"

#include <algorithm>
#include <optional>

#include "chat/evaluator.h"
#include "common/error.h"
#include "common/read_text.h"

namespace tpbatch::chat {
namespace {

std::string read_template_file(const std::filesystem::path& p) {
  std::optional<std::string> text = try_read_text(p);
  if (!text) throw Error("chat template file '" + p.string() + "' cannot be read");
  return std::move(*text);
}

// bos_token / eos_token: a string, an AddedToken object {"content": ...}, or null.
std::string token_text(const nlohmann::json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return "";
}

}  // namespace

ChatTemplate::ChatTemplate(const std::string& source, std::string bos_token, std::string eos_token, std::string origin)
    : bos_(std::move(bos_token)), eos_(std::move(eos_token)), origin_(std::move(origin)), source_(source) {
  tmpl_ = std::make_shared<const Template>(parse_template(source));
}

ChatTemplate ChatTemplate::load(const std::filesystem::path& model_dir, const std::string& template_file) {
  const std::filesystem::path cfg_path = model_dir / "tokenizer_config.json";
  nlohmann::json cfg = nlohmann::json::object();
  std::error_code ec;
  if (std::filesystem::exists(cfg_path, ec)) {
    try {
      cfg = nlohmann::json::parse(read_template_file(cfg_path));
    } catch (const nlohmann::json::exception& e) {
      throw Error(cfg_path.string() + ": not valid JSON (" + e.what() + ")");
    }
  } else if (template_file.empty()) {
    throw Error("'messages' rows need a chat template: " + cfg_path.string() +
                " is missing (or name a template file with the job key chat_template)");
  }
  std::string source, origin;
  if (!template_file.empty()) {
    source = read_template_file(template_file);
    origin = template_file;
  } else {
    auto it = cfg.find("chat_template");
    if (it == cfg.end() || it->is_null())
      throw Error("'messages' rows need a chat template: " + cfg_path.string() +
                  " has no chat_template (name a template file with the job key chat_template)");
    if (it->is_string()) {
      source = it->get<std::string>();
    } else if (it->is_array()) {  // named templates: [{"name": "default", "template": "..."}, ...]
      for (const auto& t : *it)
        if (t.is_object() && t.value("name", "") == "default" && t.contains("template") && t["template"].is_string())
          source = t["template"].get<std::string>();
      if (source.empty())
        throw Error(cfg_path.string() + ": chat_template is a list without a template named 'default'");
    } else {
      throw Error(cfg_path.string() + ": chat_template must be a string or a list of named templates");
    }
    origin = cfg_path.string() + " chat_template";
  }
  try {
    return ChatTemplate(source, token_text(cfg, "bos_token"), token_text(cfg, "eos_token"), origin);
  } catch (const TemplateError& e) {
    throw Error(origin + ": " + e.what());
  }
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                 const nlohmann::ordered_json& kwargs) const {
  Dict globals = {{"messages", Value::from_json(messages)},
                  {"add_generation_prompt", Value::boolean(add_generation_prompt)},
                  {"bos_token", Value::string(bos_)},
                  {"eos_token", Value::string(eos_)}};
  if (kwargs.is_object()) {
    for (const auto& [name, value] : kwargs.items()) {
      if (name == "messages") throw TemplateError("chat_template_kwargs may not set 'messages'");
      auto it = std::find_if(globals.begin(), globals.end(), [&](const auto& g) { return g.first == name; });
      if (it != globals.end()) it->second = Value::from_json(value);
      else globals.emplace_back(name, Value::from_json(value));
    }
  }
  return chat::render(*tmpl_, globals);
}

}  // namespace tpbatch::chat

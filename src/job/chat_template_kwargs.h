#pragma once
// chat_template_kwargs: further variables for the chat template (Qwen3's enable_thinking, say),
// as Hugging Face's apply_chat_template(**kwargs) and vLLM's request key pass them. The job key
// (YAML, read as JSON by job/yaml_json.h) and a row or an OpenAI chat body (JSON) each give one
// JSON object; a row's names replace the job's.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace tpbatch {

// Why `kwargs` cannot be a template's variables ("" when it can): not an object, or it names
// `messages` (the row's own messages; the other variables, add_generation_prompt included, may be
// replaced as apply_chat_template allows). `what` names the key in the message.
std::string chat_template_kwargs_problem(const nlohmann::ordered_json& kwargs, const std::string& what);

// The variables a row renders with: the job's (JSON text, "" = none) with the row's (JSON text)
// laid over them name by name. Null when neither has any.
nlohmann::ordered_json merged_chat_template_kwargs(const std::string& job_kwargs,
                                                   const std::optional<std::string>& row_kwargs);

}  // namespace tpbatch

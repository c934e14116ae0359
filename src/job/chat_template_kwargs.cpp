#include "job/chat_template_kwargs.h"

namespace tpbatch {

using ojson = nlohmann::ordered_json;

std::string chat_template_kwargs_problem(const ojson& kwargs, const std::string& what) {
  if (!kwargs.is_object())
    return "'" + what + "' must be an object of template variables (such as {\"enable_thinking\": false}), got " +
           (kwargs.is_array() ? std::string("a list") : kwargs.dump());
  if (kwargs.contains("messages"))
    return "'" + what + ".messages' is not allowed: the template's messages are the row's";
  return "";
}

ojson merged_chat_template_kwargs(const std::string& job_kwargs, const std::optional<std::string>& row_kwargs) {
  if (job_kwargs.empty() && !row_kwargs) return nullptr;
  ojson out = job_kwargs.empty() ? ojson::object() : ojson::parse(job_kwargs);
  if (row_kwargs) {
    const ojson row = ojson::parse(*row_kwargs);
    for (const auto& [k, v] : row.items()) out[k] = v;
  }
  return out;
}

}  // namespace tpbatch

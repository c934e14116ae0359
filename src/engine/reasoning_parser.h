#pragma once
// The reasoning split of a generated text (job key `reasoning`): the text of its <think> block and
// the answer after it, as vLLM's reasoning parsers of the same names split a finished output.
#include <string>
#include <string_view>

#include "job/job_spec.h"

namespace tpbatch {

inline constexpr std::string_view kThinkOpen = "<think>";
inline constexpr std::string_view kThinkClose = "</think>";

struct ReasoningSplit {
  std::string reasoning;  // /reasoning_text
  std::string content;    // /output_text
};

// deepseek_r1: a leading part up to and including <think> is dropped; the reasoning is the text
// before the first </think>, the answer what follows it; without </think> the whole text is
// reasoning (the chat template opened the block). qwen3: the same, except that without </think>
// the whole text is the answer (thinking was off). none: all answer. Never called with auto.
ReasoningSplit split_reasoning(Reasoning parser, std::string_view text);

// The parser `reasoning: auto` stands for, from the chat template's source: none when it never
// writes </think>; qwen3 when it reads enable_thinking (thinking may be switched off); else
// deepseek_r1. Any other setting is returned as it is.
Reasoning resolve_reasoning(Reasoning configured, std::string_view chat_template_source);

// The job-file spelling: "none", "deepseek_r1", "qwen3", "auto".
const char* reasoning_name(Reasoning parser);

}  // namespace tpbatch

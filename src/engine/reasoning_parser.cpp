#include "engine/reasoning_parser.h"

namespace tpbatch {

ReasoningSplit split_reasoning(Reasoning parser, std::string_view text) {
  if (parser == Reasoning::kNone || parser == Reasoning::kAuto) return {"", std::string(text)};
  // A generated <think> (and whatever came before it) is not part of either text.
  if (const size_t open = text.find(kThinkOpen); open != std::string_view::npos) text.remove_prefix(open + kThinkOpen.size());
  const size_t close = text.find(kThinkClose);
  if (close == std::string_view::npos) {
    if (parser == Reasoning::kQwen3) return {"", std::string(text)};
    return {std::string(text), ""};
  }
  return {std::string(text.substr(0, close)), std::string(text.substr(close + kThinkClose.size()))};
}

Reasoning resolve_reasoning(Reasoning configured, std::string_view source) {
  if (configured != Reasoning::kAuto) return configured;
  if (source.find(kThinkClose) == std::string_view::npos) return Reasoning::kNone;
  if (source.find("enable_thinking") != std::string_view::npos) return Reasoning::kQwen3;
  return Reasoning::kDeepSeekR1;
}

const char* reasoning_name(Reasoning parser) {
  switch (parser) {
    case Reasoning::kNone: return "none";
    case Reasoning::kAuto: return "auto";
    case Reasoning::kDeepSeekR1: return "deepseek_r1";
    case Reasoning::kQwen3: return "qwen3";
  }
  return "?";
}

}  // namespace tpbatch

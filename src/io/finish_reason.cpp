#include "io/finish_reason.h"

#include <array>

namespace tpbatch {

namespace {
// In FinishReason's order.
constexpr std::array<std::string_view, 6> kNames = {"length", "eos", "stop", "scored", "embedded", "error"};
}  // namespace

std::string_view finish_reason_name(std::optional<FinishReason> reason) {
  return reason ? kNames[static_cast<size_t>(*reason)] : std::string_view("");  // "": NUL-ended, as the names are
}

std::optional<FinishReason> parse_finish_reason(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i)
    if (kNames[i] == name) return static_cast<FinishReason>(i);
  return std::nullopt;
}

std::string_view openai_finish_reason(std::optional<FinishReason> reason) {
  return reason == FinishReason::kEos ? finish_reason_name(FinishReason::kStop) : finish_reason_name(reason);
}

}  // namespace tpbatch

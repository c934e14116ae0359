#pragma once
// How a row ended: the vocabulary of /finish_reason. The HDF5 file, the row journal and export
// spell each reason as finish_reason_name() does; everything else holds the enum.
#include <cstdint>
#include <optional>
#include <string_view>

namespace tpbatch {

enum class FinishReason : uint8_t {
  kLength,    // length: max_new_tokens, the context or the KV cache ran out
  kEos,       // eos: an end-of-sequence token
  kStop,      // stop: a stop string or sampling.stop_token_ids
  kScored,    // scored: task score, every target token scored
  kEmbedded,  // embedded: task embed, the prompt pooled
  kError,     // error: the row failed (its /error says why)
};

// The name stored in the results file; "" for none (a row not finished).
std::string_view finish_reason_name(std::optional<FinishReason> reason);
// The reason a stored name spells; nullopt for "" and for a name that is no reason.
std::optional<FinishReason> parse_finish_reason(std::string_view name);
// The OpenAI finish_reason of a completion choice: eos and stop are both "stop".
std::string_view openai_finish_reason(std::optional<FinishReason> reason);

}  // namespace tpbatch

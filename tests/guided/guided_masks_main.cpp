// Test-only: the engine's allowed-token mask at every step of a walk, for comparison with a
// reference engine (tests/guided/compare_masks_with_llguidance.py). Not part of the product.
//
//   tpbatch_guided_masks TOKENIZER_JSON < requests.jsonl > masks.jsonl
//
// A request line holds a row's guided_* keys (read as an input line's, so a schema's keys come in
// the same order as in a job), "eos": [ids], and the walk: "tokens": [ids], or "text": a string
// the constraint matches, walked greedily by the longest token that writes the text's next bytes
// (a tokenizer's own encoding may add a prefix space a constraint refuses). The answer line:
// {"regex", "tokens" (the walk), "masks": one per step, before each token and after the last, as
// base64 of a little-endian bitmask in 32-bit words (EOS set where the output is a whole match),
// "dead_at": the first token the constraint refused, or null} or {"error": why}.
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/constraint_vocabulary.h"
#include "guided/constraint.h"
#include "io/line_sampling.h"
#include "tokenizer/tokenizer.h"

namespace {

using nlohmann::json;
using tpbatch::guided::Constraint;
using tpbatch::guided::TokenBytes;

std::string base64(const std::vector<uint8_t>& in) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < in.size(); i += 3) {
    const uint32_t n = (uint32_t{in[i]} << 16) | (i + 1 < in.size() ? uint32_t{in[i + 1]} << 8 : 0) |
                       (i + 2 < in.size() ? uint32_t{in[i + 2]} : 0);
    out += k[(n >> 18) & 63];
    out += k[(n >> 12) & 63];
    out += i + 1 < in.size() ? k[(n >> 6) & 63] : '=';
    out += i + 2 < in.size() ? k[n & 63] : '=';
  }
  return out;
}

std::string mask_of(Constraint& c, int32_t state, const std::vector<int32_t>& eos, int64_t vocab) {
  std::vector<uint8_t> bits(static_cast<size_t>((vocab + 31) / 32 * 4), 0);
  auto set = [&](int32_t id) { bits[id / 8] |= static_cast<uint8_t>(1u << (id % 8)); };
  for (int32_t id : c.allowed(state)) set(id);
  if (c.complete(state))
    for (int32_t id : eos) set(id);
  return base64(bits);
}

// The longest usable token whose bytes begin text[at..]; -1 when none does.
int32_t longest_token_at(const TokenBytes& v, const std::string& text, size_t at) {
  int32_t best = -1;
  size_t best_len = 0;
  for (size_t id = 0; id < v.bytes.size(); ++id) {
    const std::string& b = v.bytes[id];
    if (!v.usable[id] || b.size() <= best_len || b.size() > text.size() - at) continue;
    if (text.compare(at, b.size(), b) == 0) best = static_cast<int32_t>(id), best_len = b.size();
  }
  return best;
}

std::vector<int32_t> greedy_walk(const TokenBytes& v, const std::string& text) {
  std::vector<int32_t> ids;
  for (size_t at = 0; at < text.size();) {
    const int32_t id = longest_token_at(v, text, at);
    if (id < 0) throw std::runtime_error("no token writes the text's byte " + std::to_string(at));
    ids.push_back(id);
    at += v.bytes[id].size();
  }
  return ids;
}

json answer(const json& request, const std::shared_ptr<const TokenBytes>& vocab, int64_t vocab_size) {
  tpbatch::SamplingParams params;
  tpbatch::apply_line_sampling(request, tpbatch::LineContext{0, "request"}, params);
  const std::string regex = tpbatch::guided::constraint_regex(params.guided);
  Constraint c(regex, vocab);
  const std::vector<int32_t> eos = request.value("eos", std::vector<int32_t>{});
  const std::vector<int32_t> tokens = request.contains("text")
                                          ? greedy_walk(*vocab, request["text"].get<std::string>())
                                          : request.value("tokens", std::vector<int32_t>{});
  json masks = json::array();
  json dead_at = nullptr;
  int32_t state = c.start();
  for (size_t i = 0; i <= tokens.size(); ++i) {
    masks.push_back(mask_of(c, state, eos, vocab_size));
    if (i == tokens.size()) break;
    state = c.advance(state, tokens[i]);
    if (state == tpbatch::guided::ByteDfa::kDead) {
      dead_at = i;
      break;
    }
  }
  return json{{"regex", regex}, {"tokens", tokens}, {"masks", masks}, {"dead_at", dead_at}};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: tpbatch_guided_masks TOKENIZER_JSON < requests.jsonl\n";
    return 2;
  }
  const auto tok = tpbatch::Tokenizer::load(argv[1]);
  const auto vocab = tpbatch::constraint_vocabulary(*tok);
  std::string line;
  while (std::getline(std::cin, line)) {
    json out;
    try {
      out = answer(json::parse(line), vocab, tok->vocab_size());
    } catch (const tpbatch::BadLine& e) {
      out = json{{"error", e.what()}};
    } catch (const std::exception& e) {
      out = json{{"error", e.what()}};
    }
    std::cout << out.dump() << "\n";
  }
  return 0;
}

// RowResult <-> bytes, for sending finished rows between ranks. Little-endian host layout:
// magic, then each field as fixed-size raw bytes or (uint64 count, raw elements).
#include "io/row_result.h"

#include <cstring>
#include <type_traits>

#include "common/error.h"

namespace tpbatch {
namespace {

constexpr uint32_t kMagic = 0x32525254;        // "TRR2"
constexpr uint32_t kMagicBefore = 0x31525254;  // "TRR1", an older journal's records: no reasoning_text

template <typename T>
void put(std::string& out, const T& v) {
  static_assert(std::is_trivially_copyable_v<T>);
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <typename T>
void put_array(std::string& out, const T* data, size_t n) {
  put<uint64_t>(out, n);
  if (n) out.append(reinterpret_cast<const char*>(data), n * sizeof(T));
}

class Reader {
 public:
  explicit Reader(std::string_view b) : b_(b) {}

  template <typename T>
  T get() {
    T v;
    need(sizeof v);
    std::memcpy(&v, b_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }

  template <typename T>
  void get_array(std::vector<T>& out) {
    uint64_t n = get<uint64_t>();
    if (n > (b_.size() - pos_) / sizeof(T)) fail("array of " + std::to_string(n) + " elements overruns the buffer");
    out.resize(n);
    if (n) std::memcpy(out.data(), b_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
  }

  void get_string(std::string& out) {
    uint64_t n = get<uint64_t>();
    if (n > b_.size() - pos_) fail("string of " + std::to_string(n) + " bytes overruns the buffer");
    out.assign(b_.data() + pos_, n);
    pos_ += n;
  }

  bool at_end() const { return pos_ == b_.size(); }

  [[noreturn]] void fail(const std::string& why) const {
    throw Error("malformed row result (" + std::to_string(b_.size()) + " bytes, at byte " + std::to_string(pos_) +
                "): " + why);
  }

 private:
  void need(size_t n) const {
    if (n > b_.size() - pos_) fail("truncated");
  }
  std::string_view b_;
  size_t pos_ = 0;
};

}  // namespace

std::string serialize(const RowResult& r) {
  std::string out;
  out.reserve(104 + r.id.size() + r.output_text.size() + r.reasoning_text.size() + r.error.size() +
              4 * (r.prompt_tokens.size() + r.output_tokens.size() + r.output_logprobs.size() + r.embedding.size()));
  put<uint32_t>(out, kMagic);
  put<int64_t>(out, r.index);
  put<int64_t>(out, r.line);
  put<int32_t>(out, r.sample);
  put_array(out, r.id.data(), r.id.size());
  put_array(out, r.prompt_tokens.data(), r.prompt_tokens.size());
  put_array(out, r.output_tokens.data(), r.output_tokens.size());
  put_array(out, r.output_text.data(), r.output_text.size());
  put_array(out, r.output_logprobs.data(), r.output_logprobs.size());
  put_array(out, r.top_logprob_tokens.data(), r.top_logprob_tokens.size());
  put_array(out, r.top_logprobs.data(), r.top_logprobs.size());
  put<double>(out, r.logprob_sum);
  put<uint8_t>(out, r.is_greedy);
  const std::string_view finish = finish_reason_name(r.finish_reason);  // by name: the journal outlives the enum's order
  put_array(out, finish.data(), finish.size());
  put_array(out, r.error.data(), r.error.size());
  put<int64_t>(out, r.prompt_tokens_cached);
  put_array(out, r.embedding.data(), r.embedding.size());
  put<int64_t>(out, r.truncated_tokens);
  put<uint8_t>(out, r.warning_kind);
  put_array(out, r.warning.data(), r.warning.size());
  put<double>(out, r.ttft_seconds);  // rank 0's TTFT/TPOT percentiles cover every replica's rows
  put<double>(out, r.tpot_seconds);
  put_array(out, r.reasoning_text.data(), r.reasoning_text.size());
  return out;
}

RowResult deserialize_row_result(std::string_view bytes) {
  Reader rd(bytes);
  const uint32_t magic = rd.get<uint32_t>();
  if (magic != kMagic && magic != kMagicBefore) rd.fail("bad magic");
  RowResult r;
  r.index = rd.get<int64_t>();
  if (r.index < 0) rd.fail("negative row index");
  r.line = rd.get<int64_t>();
  r.sample = rd.get<int32_t>();
  if (r.line < 0 || r.line > r.index || r.sample < 0) rd.fail("bad input line or sample");
  rd.get_string(r.id);
  rd.get_array(r.prompt_tokens);
  rd.get_array(r.output_tokens);
  rd.get_string(r.output_text);
  rd.get_array(r.output_logprobs);
  rd.get_array(r.top_logprob_tokens);
  rd.get_array(r.top_logprobs);
  if (r.top_logprob_tokens.size() != r.top_logprobs.size()) rd.fail("top_logprob_tokens and top_logprobs differ in length");
  r.logprob_sum = rd.get<double>();
  r.is_greedy = rd.get<uint8_t>();
  if (r.is_greedy > 1) rd.fail("is_greedy is not 0 or 1");
  std::string finish;
  rd.get_string(finish);
  r.finish_reason = parse_finish_reason(finish);
  if (!finish.empty() && !r.finish_reason) rd.fail("unknown finish_reason '" + finish + "'");
  rd.get_string(r.error);
  r.prompt_tokens_cached = rd.get<int64_t>();
  if (r.prompt_tokens_cached < 0) rd.fail("negative prompt_tokens_cached");
  rd.get_array(r.embedding);
  r.truncated_tokens = rd.get<int64_t>();
  if (r.truncated_tokens < 0) rd.fail("negative truncated_tokens");
  r.warning_kind = rd.get<uint8_t>();
  if (r.warning_kind >= kNumRowWarnings) rd.fail("unknown warning kind");
  rd.get_string(r.warning);
  r.ttft_seconds = rd.get<double>();
  r.tpot_seconds = rd.get<double>();
  if (!(r.ttft_seconds >= 0) || !(r.tpot_seconds >= 0)) rd.fail("negative or NaN ttft/tpot seconds");
  if (magic == kMagic) rd.get_string(r.reasoning_text);
  if (!rd.at_end()) rd.fail("trailing bytes");
  return r;
}

}  // namespace tpbatch

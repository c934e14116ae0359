// RowResult binary form: round trip, and malformed bytes rejected without reading out of bounds.
#include <gtest/gtest.h>

#include <cstring>

#include "common/error.h"
#include "io/row_result.h"

using namespace tpbatch;

namespace {
RowResult sample() {
  RowResult r;
  r.index = 123456789012;
  r.line = 123456789000;
  r.sample = 12;
  r.warning_kind = kWarnTruncated;
  r.warning = "input line 5: dropped";
  r.id = "row-\xC3\xA9";
  r.prompt_tokens = {1, 2, 3, 40000};
  r.output_tokens = {7, -1, 2147483647};
  r.output_text = std::string("hello\0world", 11);
  r.reasoning_text = "<b>why</b>";
  r.output_logprobs = {-0.5f, -1.25f, 0.0f};
  r.logprob_sum = -1.75;
  r.is_greedy = 1;
  r.finish_reason = FinishReason::kLength;
  r.error = "";
  r.prompt_tokens_cached = 2;
  r.embedding = {0.25f, -3.0f};
  r.truncated_tokens = 9;
  r.top_logprob_tokens = {5, 6};
  r.top_logprobs = {-0.1f, -2.5f};
  r.ttft_seconds = 1.5;
  r.tpot_seconds = 0.0625;
  return r;
}
void expect_equal(const RowResult& a, const RowResult& b) {
  EXPECT_EQ(a.index, b.index);
  EXPECT_EQ(a.line, b.line);
  EXPECT_EQ(a.sample, b.sample);
  EXPECT_EQ(a.warning_kind, b.warning_kind);
  EXPECT_EQ(a.warning, b.warning);
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.prompt_tokens, b.prompt_tokens);
  EXPECT_EQ(a.output_tokens, b.output_tokens);
  EXPECT_EQ(a.output_text, b.output_text);
  EXPECT_EQ(a.reasoning_text, b.reasoning_text);
  EXPECT_EQ(a.output_logprobs, b.output_logprobs);
  EXPECT_EQ(a.logprob_sum, b.logprob_sum);
  EXPECT_EQ(a.is_greedy, b.is_greedy);
  EXPECT_EQ(a.finish_reason, b.finish_reason);
  EXPECT_EQ(a.error, b.error);
  EXPECT_EQ(a.prompt_tokens_cached, b.prompt_tokens_cached);
  EXPECT_EQ(a.embedding, b.embedding);
  EXPECT_EQ(a.truncated_tokens, b.truncated_tokens);
  EXPECT_EQ(a.top_logprob_tokens, b.top_logprob_tokens);
  EXPECT_EQ(a.top_logprobs, b.top_logprobs);
  EXPECT_EQ(a.ttft_seconds, b.ttft_seconds);  // rank 0's latency percentiles include remote replicas' rows
  EXPECT_EQ(a.tpot_seconds, b.tpot_seconds);
}
}  // namespace

TEST(RowResult, RoundTrip) { expect_equal(deserialize_row_result(serialize(sample())), sample()); }

// A record of the journal format before reasoning_text ("TRR1": the same fields without it) still
// reads, so a journal an older tpbatch left is replayed, not recomputed.
TEST(RowResult, ARecordWithoutReasoningTextReads) {
  RowResult r = sample();
  r.reasoning_text.clear();
  std::string bytes = serialize(r);
  bytes.resize(bytes.size() - sizeof(uint64_t));  // the empty reasoning_text's length
  ASSERT_EQ(bytes.substr(0, 4), "TRR2");            // the magic, little-endian
  bytes[3] = '1';
  expect_equal(deserialize_row_result(bytes), r);
}

TEST(RowResult, EmptyRowRoundTrip) {
  RowResult r;
  expect_equal(deserialize_row_result(serialize(r)), r);
}

TEST(RowResult, EveryTruncationRejected) {
  std::string b = serialize(sample());
  for (size_t n = 0; n < b.size(); ++n) {
    std::string prefix = b.substr(0, n);  // own copy: a read past it would show under sanitizers
    EXPECT_THROW(deserialize_row_result(prefix), Error) << "length " << n;
  }
}

TEST(RowResult, TrailingBytesRejected) { EXPECT_THROW(deserialize_row_result(serialize(sample()) + "x"), Error); }

TEST(RowResult, BadMagicRejected) {
  std::string b = serialize(sample());
  b[0] ^= 0x55;
  EXPECT_THROW(deserialize_row_result(b), Error);
}

TEST(RowResult, HugeLengthRejected) {
  std::string b = serialize(sample());
  uint64_t huge = ~uint64_t{0} / 2;
  std::memcpy(b.data() + 4 + 8, &huge, sizeof huge);  // the id's length
  EXPECT_THROW(deserialize_row_result(b), Error);
  std::string c = serialize(sample());
  size_t tokens_at = 4 + 8 + 8 + sample().id.size();
  uint64_t overflow = (~uint64_t{0} / 4) + 2;  // count * 4 would wrap around
  std::memcpy(c.data() + tokens_at, &overflow, sizeof overflow);
  EXPECT_THROW(deserialize_row_result(c), Error);
}

TEST(RowResult, UnknownFinishReasonRejected) {
  std::string b = serialize(sample());
  const size_t at = b.find("length");
  ASSERT_NE(at, std::string::npos);
  b[at + 3] = 'x';  // "lenxth": same length, no reason of that name
  EXPECT_THROW(deserialize_row_result(b), Error);
}

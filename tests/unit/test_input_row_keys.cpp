// Per-row keys: a key the job does not read is an error row naming it (input.unknown_keys: error,
// the default) or skipped (input.unknown_keys: ignore); never silently dropped by default.
// Also the row fields beside the prompt: "messages", "completion_tokens".
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "io/input_row.h"
#include "job/sampling_keys.h"

using namespace tpbatch;

namespace {

JobSpec job(Task task = Task::kGenerate, UnknownKeys unknown = UnknownKeys::kError) {
  JobSpec j;
  j.task = task;
  j.input.unknown_keys = unknown;
  return j;
}

std::string bad(std::string_view line, const JobSpec& j = job()) {
  try {
    parse_input_row(line, 6, j, 512);
  } catch (const BadLine& b) {
    return b.reason;
  }
  ADD_FAILURE() << "accepted: " << line;
  return "";
}

}  // namespace

TEST(InputRowKeys, UnknownKeyIsAnErrorNamingIt) {
  for (const char* key : {"suffix", "max_tokens", "best_of", "echo", "logprobs"}) {
    const std::string line = std::string(R"({"prompt": "x", ")") + key + R"(": 5})";
    const std::string msg = bad(line);
    EXPECT_EQ(msg.rfind(std::string("input line 7: unknown key '") + key + "'", 0), 0u) << msg;
    EXPECT_NE(msg.find("input.unknown_keys: ignore"), std::string::npos) << msg;
  }
}

TEST(InputRowKeys, UnknownKeyIgnoredOnlyWhenAsked) {
  InputRow r = parse_input_row(R"({"prompt": "x", "presence_penalty": 1.5, "best_of": 3})", 0, job(Task::kGenerate, UnknownKeys::kIgnore), 512);
  EXPECT_EQ(r.text.value(), "x");
}

TEST(InputRowKeys, EveryKnownKeyAccepted) {
  // id, prompt and each per-line sampling override: nothing unknown.
  std::string line = R"({"id": "a", "prompt": "x")";
  for (const auto& k : per_line_sampling_names()) {
    if (k == "stop") line += R"(, "stop": ["s"])";
    else if (k == "ignore_eos") line += R"(, "ignore_eos": true)";
    else if (k == "temperature" || k == "top_p" || k == "min_p") line += ", \"" + k + "\": 0.5";
    else if (k == "stop_token_ids") line += R"(, "stop_token_ids": [3])";
    else if (k == "guided_regex") line += R"(, "guided_regex": "a")";  // a line sets one kind of constraint
    else if (k == "guided_json" || k == "guided_json_object" || k == "guided_choice" || k == "guided_grammar") continue;
    else line += ", \"" + k + "\": 3";
  }
  line += "}";
  EXPECT_NO_THROW(parse_input_row(line, 0, job(), 512)) << line;
}

TEST(InputRowKeys, CustomFieldNamesAreKnownAndDefaultNamesAreNot) {
  JobSpec j = job();
  j.input.text_field = "text";
  j.input.id_field = "key";
  EXPECT_NO_THROW(parse_input_row(R"({"key": 1, "text": "x"})", 0, j, 512));
  // "prompt" is not read by this job: its text field is "text".
  EXPECT_EQ(bad(R"({"text": "x", "prompt": "y"})", j).rfind("input line 7: unknown key 'prompt'", 0), 0u);
}

TEST(InputRowKeys, CompletionIsReadOnlyByScore) {
  const std::string msg = bad(R"({"prompt": "x", "completion": " y"})");
  EXPECT_NE(msg.find("unknown key 'completion' ('completion' is read only by task: score"), std::string::npos) << msg;
  EXPECT_NO_THROW(parse_input_row(R"({"prompt": "x", "completion": " y"})", 0, job(Task::kScore), 512));
}

TEST(InputRowKeys, MissingPromptReportedBeforeUnknownKeys) {
  EXPECT_EQ(bad(R"({"text": "hi"})"), "input line 7: field 'prompt' is missing");
}

TEST(InputRowKeys, CompletionTokensParsedAndChecked) {
  InputRow r = parse_input_row(R"({"prompt": "x", "completion_tokens": [5, 7]})", 0, job(Task::kScore), 512);
  EXPECT_EQ(r.completion_tokens.value(), (std::vector<int32_t>{5, 7}));
  EXPECT_FALSE(r.completion.has_value());
  EXPECT_EQ(bad(R"({"prompt": "x", "completion_tokens": [5, 512]})", job(Task::kScore)),
            "input line 7: token id 512 out of range [0, 512)");
  EXPECT_EQ(bad(R"({"prompt": "x", "completion_tokens": "5 7"})", job(Task::kScore)),
            "input line 7: 'completion_tokens' must be a list of token ids");
  EXPECT_EQ(bad(R"({"prompt": "x", "completion": "a", "completion_tokens": [5]})", job(Task::kScore)),
            "input line 7: a row has either 'completion' or 'completion_tokens', not both");
}

TEST(InputRowKeys, MessagesParsedAndChecked) {
  InputRow r = parse_input_row(R"({"messages": [{"role": "user", "content": "hi"}]})", 0, job(), 512);
  EXPECT_FALSE(r.text.has_value());
  EXPECT_EQ(r.messages_json.value(), R"([{"role":"user","content":"hi"}])");  // the line's key order
  EXPECT_EQ(bad(R"({"prompt": "x", "messages": [{"role": "user", "content": "hi"}]})"),
            "input line 7: a row has either 'prompt' or 'messages', not both");
  EXPECT_EQ(bad(R"({"messages": []})"), "input line 7: 'messages' is empty");
  EXPECT_EQ(bad(R"({"messages": "hi"})"), R"(input line 7: 'messages' must be a list of {"role", "content"} objects)");
  EXPECT_EQ(bad(R"({"messages": [{"content": "hi"}]})"), "input line 7: 'messages[0].role' must be a string");
  EXPECT_EQ(bad(R"({"messages": [{"role": "user", "content": 5}]})"),
            R"(input line 7: 'messages[0].content' must be a string or a list of content parts ({"type": "text", "text": ...}))");
}

namespace {

struct TempJobDir {
  std::filesystem::path dir;
  TempJobDir() {
    dir = std::filesystem::temp_directory_path() / ("tpbatch_rowkeys_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir / "m");
    std::ofstream(dir / "in.jsonl") << "{\"prompt\": \"x\"}\n";
    std::ofstream(dir / "t.jinja") << "{{ messages[0].content }}";
  }
  ~TempJobDir() { std::filesystem::remove_all(dir); }
  std::string error_of(const std::string& yaml) {
    try {
      parse_job(yaml, {}, dir);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
};

}  // namespace

TEST(InputRowKeys, JobKeysForRowHandling) {
  TempJobDir t;
  const std::string base = "model: m\ninput:\n  path: in.jsonl\n";
  JobSpec d = parse_job(base, {}, t.dir);
  EXPECT_EQ(d.input.unknown_keys, UnknownKeys::kError);
  EXPECT_EQ(d.input.score_tokenization, ScoreTokenization::kJoint);
  EXPECT_TRUE(d.chat_template.empty());
  JobSpec j = parse_job(base + "  unknown_keys: ignore\n  score_tokenization: separate\nchat_template: t.jinja\n", {}, t.dir);
  EXPECT_EQ(j.input.unknown_keys, UnknownKeys::kIgnore);
  EXPECT_EQ(j.input.score_tokenization, ScoreTokenization::kSeparate);
  EXPECT_EQ(j.chat_template, (t.dir / "t.jinja").string());
  // The effective job keeps them (and parses back to the same job).
  EXPECT_EQ(parse_job(j.effective_yaml, {}, t.dir).effective_yaml, j.effective_yaml);
  EXPECT_NE(t.error_of(base + "  unknown_keys: warn\n").find("input.unknown_keys"), std::string::npos);
  EXPECT_NE(t.error_of(base + "  score_tokenization: lm_eval\n").find("input.score_tokenization"), std::string::npos);
  EXPECT_NE(t.error_of(base + "chat_template: nope.jinja\n").find("chat template file 'nope.jinja' not found"),
            std::string::npos);
}

TEST(InputRowKeys, OpenAiBatchRequestsMapToRows) {
  InputRow c = parse_input_row(
      R"({"custom_id": "r1", "method": "POST", "url": "/v1/completions", "body": {"model": "m", "prompt": "Hi",
          "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "seed": 3, "stop": ["\n"], "n": 1}})",
      0, job(), 512);
  EXPECT_EQ(c.id, "r1");
  EXPECT_EQ(c.text.value(), "Hi");
  EXPECT_EQ(c.sampling.max_new_tokens, 7);
  EXPECT_EQ(c.sampling.temperature, 0.5);
  EXPECT_EQ(c.sampling.top_p, 0.9);
  EXPECT_EQ(c.sampling.seed, 3u);
  EXPECT_EQ(c.sampling.stop, std::vector<std::string>{"\n"});
  InputRow m = parse_input_row(
      R"({"custom_id": "r2", "method": "POST", "url": "/v1/chat/completions",
          "body": {"messages": [{"role": "user", "content": "Hi"}], "max_completion_tokens": 4}})",
      1, job(), 512);
  EXPECT_EQ(m.id, "r2");
  EXPECT_FALSE(m.text.has_value());
  EXPECT_EQ(m.messages_json.value(), R"([{"role":"user","content":"Hi"}])");
  EXPECT_EQ(m.sampling.max_new_tokens, 4);
  EXPECT_EQ(bad(R"({"custom_id": "r", "url": "/v1/embeddings", "body": {"input": "x"}})"),
            "input line 7: url '/v1/embeddings' asks for an embedding, but this job's task is generate (an embeddings "
            "batch needs task: embed)");
  EXPECT_EQ(bad(R"({"custom_id": "r", "url": "/v1/files", "body": {"input": "x"}})"),
            "input line 7: url '/v1/files' is not supported (only /v1/completions, /v1/chat/completions and "
            "/v1/embeddings)");
  EXPECT_EQ(bad(R"({"custom_id": "r", "url": "/v1/completions", "body": {"prompt": "x", "best_of": 2}})")
                .rfind("input line 7: unknown key 'body.best_of'", 0),
            0u);
  EXPECT_EQ(bad(R"({"custom_id": "r", "url": "/v1/chat/completions", "body": {"prompt": "x"}})")
                .rfind("input line 7: unknown key 'body.prompt'", 0),
            0u);
  EXPECT_EQ(bad(R"({"custom_id": "r", "url": "/v1/completions", "body": {"prompt": "x"}})", job(Task::kScore)),
            "input line 7: OpenAI batch requests need task: generate");
  EXPECT_NO_THROW(parse_input_row(R"({"custom_id": "r", "url": "/v1/completions", "body": {"prompt": "x", "best_of": 2}})",
                                  0, job(Task::kGenerate, UnknownKeys::kIgnore), 512));
}

TEST(InputRowSamples, RowKeyNSetsTheSampleCount) {
  EXPECT_EQ(parse_input_row(R"({"prompt": "x", "n": 3})", 0, job(), 512).sampling.n, 3);
  EXPECT_EQ(parse_input_row(R"({"prompt": "x"})", 0, job(), 512).sampling.n, 1);
  EXPECT_EQ(parse_input_row(R"({"custom_id": "r", "url": "/v1/completions", "body": {"prompt": "x", "n": 4}})", 0,
                            job(), 512)
                .sampling.n,
            4);
}

TEST(InputRowSamples, BadNIsAnErrorRowNamingIt) {
  for (const char* v : {"0", "129", "1.5", "\"2\"", "-1"})
    EXPECT_EQ(bad(std::string(R"({"prompt": "x", "n": )") + v + "}"), "input line 7: 'n' must be an integer in [1, 128]")
        << v;
  EXPECT_EQ(bad(R"({"prompt": "x", "completion": "y", "n": 2})", job(Task::kScore)),
            "input line 7: 'n' is 2, but several samples of a prompt need task: generate");
}

TEST(InputRowSamples, SamplesOfLineReadsRowNOrTheJobDefault) {
  JobSpec j = job();
  j.sampling.n = 2;
  EXPECT_EQ(samples_of_line(R"({"prompt": "x"})", j), 2);
  EXPECT_EQ(samples_of_line(R"({"prompt": "x", "n": 5})", j), 5);
  EXPECT_EQ(samples_of_line(R"({"custom_id": "r", "body": {"prompt": "x", "n": 3}})", j), 3);
  EXPECT_EQ(samples_of_line(R"({"prompt": "say \"n\"", "m": 1})", j), 2);       // "n" inside a string
  EXPECT_EQ(samples_of_line(R"({"prompt": "x", "meta": {"n": 7}})", j), 2);     // not a top-level key
  EXPECT_EQ(samples_of_line(R"({"prompt": "x", "n": 0})", j), 2);               // bad: error rows
  EXPECT_EQ(samples_of_line(R"({"prompt": "x", "n": 3)", j), 2);                // not JSON: error rows
  // Whatever the line, the count agrees with what a valid parse gives.
  for (const char* line : {R"({"prompt": "x", "n": 7})", R"({"custom_id": "r", "url": "/v1/completions", "body": {"prompt": "x", "n": 6}})"})
    EXPECT_EQ(samples_of_line(line, j), parse_input_row(line, 0, j, 512).sampling.n) << line;
}

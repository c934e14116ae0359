// JSONL input: streaming line counting and per-line parsing with BadLine messages.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "temp_dir_test.h"
#include "common/error.h"
#include "io/input_row.h"

namespace fs = std::filesystem;
using namespace tpbatch;

namespace {

class JsonlTest : public tpbatch::TempDirTest {
 protected:
  std::string write(const std::string& content) {
    std::string p = (dir_ / "in.jsonl").string();
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }
  std::vector<std::string> read_all(const std::string& path) {
    JsonlReader r(path);
    std::vector<std::string> lines;
    std::string l;
    while (r.next(l)) lines.push_back(l);
    EXPECT_EQ(r.lines_read(), static_cast<int64_t>(lines.size()));
    return lines;
  }
};

JobSpec job(Task task = Task::kGenerate) {
  JobSpec j;
  j.task = task;
  j.sampling.max_new_tokens = 16;
  return j;
}

// The BadLine message for a line that must be rejected.
std::string bad(std::string_view line, int64_t index, const JobSpec& j = job(), int64_t vocab = 512) {
  try {
    parse_input_row(line, index, j, vocab);
  } catch (const BadLine& b) {
    EXPECT_EQ(b.index, index);
    return b.reason;
  }
  ADD_FAILURE() << "accepted: " << line;
  return "";
}

}  // namespace

TEST_F(JsonlTest, JsonlReaderStreamsLines) {
  auto lines = read_all(write("{\"a\":1}\n{\"a\":2}\n{\"a\":3}"));
  EXPECT_EQ(lines, (std::vector<std::string>{"{\"a\":1}", "{\"a\":2}", "{\"a\":3}"}));
}

TEST_F(JsonlTest, JsonlTrailingNewlineIsNotARow) {
  EXPECT_EQ(read_all(write("a\nb\n")).size(), 2u);
}

TEST_F(JsonlTest, JsonlTrailingEmptyLinesAreNotRows) {
  EXPECT_EQ(read_all(write("a\nb\n\n\r\n  \n")), (std::vector<std::string>{"a", "b"}));
}

TEST_F(JsonlTest, JsonlEmptyLineInTheMiddleIsARow) {
  EXPECT_EQ(read_all(write("a\n\n\nb\n")), (std::vector<std::string>{"a", "", "", "b"}));
}

TEST_F(JsonlTest, JsonlCarriageReturnStripped) {
  EXPECT_EQ(read_all(write("a\r\nb\r\n")), (std::vector<std::string>{"a", "b"}));
}

TEST_F(JsonlTest, JsonlByteOrderMarkStripped) {
  EXPECT_EQ(read_all(write("\xEF\xBB\xBF{}\n")), (std::vector<std::string>{"{}"}));
}

TEST_F(JsonlTest, JsonlCountMatchesReader) {
  for (std::string c : {"", "\n", "a", "a\n", "a\nb", "a\n\nb\n\n", "\n\na\n", "a\r\n\r\n", " \n", "\xEF\xBB\xBF",
                        "\xEF\xBB\xBF\na\n", "x\n \t\ny"}) {
    std::string p = write(c);
    EXPECT_EQ(count_jsonl_rows(p), static_cast<int64_t>(read_all(p).size())) << "content: '" << c << "'";
  }
}

TEST_F(JsonlTest, JsonlCountsLargeFile) {
  std::string p = (dir_ / "big.jsonl").string();
  {
    std::ofstream o(p);
    for (int i = 0; i < 300000; ++i) o << "{\"prompt\": \"row " << i << "\"}\n";
  }
  EXPECT_EQ(count_jsonl_rows(p), 300000);
  JsonlReader r(p);
  std::string l;
  int64_t n = 0;
  while (r.next(l)) ++n;
  EXPECT_EQ(n, 300000);
}

TEST_F(JsonlTest, JsonlMissingFileNamed) {
  try {
    JsonlReader r((dir_ / "nope.jsonl").string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nope.jsonl"), std::string::npos);
  }
  EXPECT_THROW(count_jsonl_rows((dir_ / "nope.jsonl").string()), Error);
}

TEST(InputRow, ParsesPromptAndStringId) {
  InputRow r = parse_input_row(R"({"id": "q1", "prompt": "Hello"})", 4, job(), 512);
  EXPECT_EQ(r.index, 4);
  EXPECT_EQ(r.id, "q1");
  EXPECT_EQ(r.text.value(), "Hello");
  EXPECT_FALSE(r.tokens.has_value());
  EXPECT_EQ(r.sampling.max_new_tokens, 16);
}

TEST(InputRow, NumericIdKeptAsText) {
  EXPECT_EQ(parse_input_row(R"({"id": 17, "prompt": "x"})", 0, job(), 512).id, "17");
}

TEST(InputRow, IdDefaultsToLineIndex) {
  EXPECT_EQ(parse_input_row(R"({"prompt": "x"})", 41, job(), 512).id, "41");
}

TEST(InputRow, CustomFieldNames) {
  JobSpec j = job();
  j.input.text_field = "question";
  j.input.id_field = "uid";
  InputRow r = parse_input_row(R"({"uid": "u", "question": "why?"})", 0, j, 512);
  EXPECT_EQ(r.id, "u");
  EXPECT_EQ(r.text.value(), "why?");
}

TEST(InputRow, BadJsonNamesLine) {
  std::string m = bad("{\"prompt\": ", 6);
  EXPECT_EQ(m.rfind("input line 7: not valid JSON (", 0), 0u) << m;
}

TEST(InputRow, NotAnObjectRejected) { EXPECT_EQ(bad("[1, 2]", 0), "input line 1: not a JSON object"); }

TEST(InputRow, EmptyLineIsBad) { EXPECT_EQ(bad("", 1), "input line 2: empty line"); }

TEST(InputRow, MissingFieldNamesLineAndField) {
  EXPECT_EQ(bad(R"({"text": "x"})", 2), "input line 3: field 'prompt' is missing");
}

TEST(InputRow, PromptMustBeString) { EXPECT_EQ(bad(R"({"prompt": 5})", 2), "input line 3: 'prompt' must be a string"); }

TEST(InputRow, InvalidUtf8NamesLine) {
  EXPECT_EQ(bad("{\"prompt\": \"caf\xC3\"}", 8), "input line 9: invalid UTF-8");
  EXPECT_EQ(bad("{\"prompt\": \"\xED\xA0\x80\"}", 8), "input line 9: invalid UTF-8");  // surrogate
}

TEST(InputRow, ValidUtf8Accepted) {
  EXPECT_EQ(parse_input_row("{\"prompt\": \"caf\xC3\xA9 \xF0\x9F\x98\x80\"}", 0, job(), 512).text.value(),
            "caf\xC3\xA9 \xF0\x9F\x98\x80");
}

TEST(InputRow, TokensFieldParsed) {
  JobSpec j = job();
  j.input.tokens_field = "ids";
  InputRow r = parse_input_row(R"({"ids": [1, 2, 511]})", 0, j, 512);
  EXPECT_EQ(r.tokens.value(), (std::vector<int32_t>{1, 2, 511}));
  EXPECT_FALSE(r.text.has_value());
}

TEST(InputRow, TokenOutOfRangeNamesLine) {
  JobSpec j = job();
  j.input.tokens_field = "ids";
  EXPECT_EQ(bad(R"({"ids": [1, 99999]})", 1, j), "input line 2: token id 99999 out of range [0, 512)");
  EXPECT_EQ(bad(R"({"ids": [-1]})", 1, j), "input line 2: token id -1 out of range [0, 512)");
  EXPECT_EQ(bad(R"({"ids": [1.5]})", 1, j), "input line 2: 'ids' must be a list of integer token ids, got 1.5");
  EXPECT_EQ(bad(R"({"ids": "1 2"})", 1, j), "input line 2: 'ids' must be a list of token ids");
  EXPECT_EQ(bad(R"({"prompt": "x"})", 1, j), "input line 2: field 'ids' is missing");
}

TEST(InputRow, PerLineOverridesApplied) {
  InputRow r = parse_input_row(
      R"({"prompt": "x", "max_new_tokens": 5, "temperature": 0.8, "top_k": 7, "top_p": 0.9, "seed": 99,
          "stop": ["a", "b"], "ignore_eos": true})",
      0, job(), 512);
  EXPECT_EQ(r.sampling.max_new_tokens, 5);
  EXPECT_EQ(r.sampling.temperature, 0.8);
  EXPECT_EQ(r.sampling.top_k, 7);
  EXPECT_EQ(r.sampling.top_p, 0.9);
  EXPECT_EQ(r.sampling.seed, 99u);
  EXPECT_EQ(r.sampling.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r.sampling.ignore_eos);
  EXPECT_EQ(parse_input_row(R"({"prompt": "x", "stop": "END"})", 0, job(), 512).sampling.stop,
            std::vector<std::string>{"END"});
}

TEST(InputRow, PerLineOverridesValidated) {
  EXPECT_EQ(bad(R"({"prompt": "x", "temperature": -1})", 4), "input line 5: 'temperature' must be a number >= 0");
  EXPECT_EQ(bad(R"({"prompt": "x", "temperature": "hot"})", 4), "input line 5: 'temperature' must be a number >= 0");
  EXPECT_EQ(bad(R"({"prompt": "x", "top_p": 0})", 4), "input line 5: 'top_p' must be a number in (0, 1]");
  EXPECT_EQ(bad(R"({"prompt": "x", "top_k": 1.5})", 4), "input line 5: 'top_k' must be an integer >= 0");
  EXPECT_EQ(bad(R"({"prompt": "x", "max_new_tokens": -1})", 4), "input line 5: 'max_new_tokens' must be an integer >= 0");
  EXPECT_EQ(bad(R"({"prompt": "x", "seed": -3})", 4), "input line 5: 'seed' must be a non-negative integer");
  EXPECT_EQ(bad(R"({"prompt": "x", "stop": [""]})", 4),
            "input line 5: 'stop' must be a string or a list of non-empty strings");
  EXPECT_EQ(bad(R"({"prompt": "x", "ignore_eos": "yes"})", 4), "input line 5: 'ignore_eos' must be true or false");
}

TEST(InputRow, BadLineCarriesIdWhenKnown) {
  try {
    parse_input_row(R"({"id": "q9", "temperature": 1})", 3, job(), 512);
    FAIL();
  } catch (const BadLine& b) {
    EXPECT_EQ(b.id, "q9");
  }
  try {
    parse_input_row("{bad", 3, job(), 512);
    FAIL();
  } catch (const BadLine& b) {
    EXPECT_EQ(b.id, "3");
  }
}

TEST(InputRow, ScoreCompletionOptional) {
  InputRow a = parse_input_row(R"({"prompt": "x", "completion": " y"})", 0, job(Task::kScore), 512);
  EXPECT_EQ(a.completion.value(), " y");
  InputRow b = parse_input_row(R"({"prompt": "x"})", 0, job(Task::kScore), 512);
  EXPECT_FALSE(b.completion.has_value());
  EXPECT_EQ(bad(R"({"prompt": "x", "completion": 3})", 0, job(Task::kScore)), "input line 1: 'completion' must be a string");
}

// input_line_id: the id a line's rows get, as parse_input_row reads it (export names unfinished rows by it).
TEST_F(JsonlTest, InputLineIdIsTheIdParseInputRowGives) {
  const JobSpec j = job();
  for (const char* line : {R"({"id": "a-1", "prompt": "x"})", R"({"id": 17, "prompt": "x"})",
                           R"({"id": 1.50, "prompt": "x"})", R"({"prompt": "x"})",
                           R"({"custom_id": "req-9", "method": "POST", "url": "/v1/completions", "body": {"model": "m", "prompt": "x"}})"})
    EXPECT_EQ(input_line_id(line, 4, "id"), parse_input_row(line, 4, j, 512).id) << line;
}

TEST_F(JsonlTest, InputLineIdOfALineThatIsNotJsonIsItsIndex) {
  EXPECT_EQ(input_line_id("{not json", 4, "id"), "4");
  EXPECT_EQ(input_line_id("[1, 2]", 5, "id"), "5");
}

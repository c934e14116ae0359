// The OpenAI Batch API output file (openai_batch_output.h).
#include "io/openai_batch_output.h"

#include <filesystem>

#include "common/error.h"
#include "common/log.h"
#include "io/finish_reason.h"

namespace tpbatch {
namespace {

using ojson = nlohmann::ordered_json;

// What the output needs from an input line: its url and body.model.
struct RequestInfo {
  bool chat = false;
  std::string model;
};

RequestInfo request_info(const std::string& line) {
  RequestInfo r;
  if (json_nesting_depth(line) > kMaxJsonDepth) return r;  // not a request the job ran (its row is an error)
  try {
    const auto j = nlohmann::json::parse(line);
    if (j.is_object()) {
      if (auto u = j.find("url"); u != j.end() && u->is_string()) r.chat = u->get<std::string>() == "/v1/chat/completions";
      if (auto b = j.find("body"); b != j.end() && b->is_object())
        if (auto m = b->find("model"); m != b->end() && m->is_string()) r.model = m->get<std::string>();
      if (j.contains("messages")) r.chat = true;
    }
  } catch (const nlohmann::json::exception&) {
  }
  return r;
}

// OpenAI's logprobs of a choice, for rows that asked for top_logprobs (else null): each token's text
// and bytes (TokenNames); a chosen token's own logprob is null when the job stored none
// (output.logprobs: false).
ojson openai_logprobs(bool chat, const RowResult& row, TokenNames& names) {
  const std::vector<int32_t>& tokens = row.output_tokens;
  const std::vector<int32_t>& top_ids = row.top_logprob_tokens;
  const std::vector<float>& top_lps = row.top_logprobs;
  if (top_ids.empty() || tokens.empty() || top_ids.size() % tokens.size() != 0) return nullptr;
  const size_t k = top_ids.size() / tokens.size();
  auto own = [&](size_t pos) -> ojson {
    return pos < row.output_logprobs.size() ? ojson(row.output_logprobs[pos]) : ojson(nullptr);
  };
  if (chat) {
    ojson content = ojson::array();
    for (size_t pos = 0; pos < tokens.size(); ++pos) {
      ojson alts = ojson::array();
      for (size_t a = 0; a < k; ++a) {
        const std::string t = names.text(top_ids[pos * k + a]);
        alts.push_back({{"token", t}, {"logprob", top_lps[pos * k + a]}, {"bytes", names.bytes(t)}});
      }
      const std::string t = names.text(tokens[pos]);
      content.push_back({{"token", t}, {"logprob", own(pos)}, {"bytes", names.bytes(t)}, {"top_logprobs", alts}});
    }
    return {{"content", content}};
  }
  ojson toks = ojson::array(), own_lps = ojson::array(), tops = ojson::array();
  for (size_t pos = 0; pos < tokens.size(); ++pos) {
    toks.push_back(names.text(tokens[pos]));
    own_lps.push_back(own(pos));
    ojson alts = ojson::object();
    for (size_t a = 0; a < k; ++a) alts[names.text(top_ids[pos * k + a])] = top_lps[pos * k + a];
    tops.push_back(alts);
  }
  return {{"tokens", toks}, {"token_logprobs", own_lps}, {"top_logprobs", tops}, {"text_offset", nullptr}};
}

// A text of a reasoning job's choice as vLLM's reasoning parsers give it: null when empty.
ojson text_or_null(const std::string& text) { return text.empty() ? ojson(nullptr) : ojson(text); }

// One choice of a completion: sample `index` of its line. A reasoning job's chat message has
// vLLM's reasoning_content; a completion's choice has it beside "text".
ojson openai_choice(bool chat, bool reasoning, int32_t index, const RowResult& row, TokenNames& names) {
  ojson choice;
  choice["index"] = index;
  if (chat && reasoning)
    choice["message"] = {{"role", "assistant"},
                         {"reasoning_content", text_or_null(row.reasoning_text)},
                         {"content", text_or_null(row.output_text)}};
  else if (chat) choice["message"] = {{"role", "assistant"}, {"content", row.output_text}};
  else choice["text"] = row.output_text;
  if (!chat && reasoning) choice["reasoning_content"] = text_or_null(row.reasoning_text);
  choice["logprobs"] = openai_logprobs(chat, row, names);
  choice["finish_reason"] = std::string(openai_finish_reason(row.finish_reason));
  return choice;
}

ojson not_computed_error() {
  return {{"code", "not_computed"},
          {"message", "the job did not finish this row (run it again with output.if_exists: resume)"}};
}

ojson response(int status, const std::string& n, ojson body) {
  return {{"status_code", status}, {"request_id", "req_" + n}, {"body", std::move(body)}};
}

ojson error_body(const std::string& message) {
  return {{"error", {{"message", message}, {"type", "invalid_request_error"}, {"param", nullptr}, {"code", nullptr}}}};
}

// The /v1/embeddings response body.
ojson embedding_body(const RowResult& row, const std::string& model) {
  ojson item;
  item["object"] = "embedding";
  item["index"] = 0;
  item["embedding"] = row.embedding;
  ojson body;
  body["object"] = "list";
  body["data"] = ojson::array({item});
  body["model"] = model;
  body["usage"] = {{"prompt_tokens", row.prompt_tokens.size()}, {"total_tokens", row.prompt_tokens.size()}};
  return body;
}

}  // namespace

std::string TokenNames::text(int32_t id) {
  const Tokenizer* t = tokenizer();
  if (!t) return "token_id:" + std::to_string(id);
  const int32_t one[1] = {id};
  std::string s = t->decode(one, /*skip_special_tokens=*/false);
  // A SentencePiece word piece ("▁the") decoded alone loses its leading space, which the
  // token stands for.
  static const std::string kWordStart = "\xe2\x96\x81";
  if (t->id_to_token(id).rfind(kWordStart, 0) == 0 && s.rfind(' ', 0) != 0) s.insert(0, " ");
  return s;
}

ojson TokenNames::bytes(const std::string& text) {
  if (!tokenizer()) return nullptr;
  ojson out = ojson::array();
  for (unsigned char c : text) out.push_back(static_cast<int>(c));
  return out;
}

const Tokenizer* TokenNames::tokenizer() {
  if (tried_) return tok_.get();
  tried_ = true;
  std::string why = "the results file names no model folder";
  for (const auto& [dir, how] : dirs_) {
    try {
      tok_ = Tokenizer::load(std::filesystem::path(dir) / "tokenizer.json");
      return tok_.get();
    } catch (const Error& e) {
      why = e.what();
    }
  }
  log_warning("export: logprob tokens are written as token_id:N: the model's tokenizer cannot be read (%s)",
              why.c_str());
  return nullptr;
}

void OpenAIBatchOutput::add(const RowResult& row, bool done) {
  // One output line per input line: a line's further samples (n > 1) are more choices of it. How
  // many rows a line has comes from the line itself (samples_of_line), as when the job ran: a row
  // never finished has no /input_line or /sample of its own.
  if (samples_left_ > 0 && !pending_.is_null()) {
    --samples_left_;
    add_sample(row, done);
    return;
  }
  write_pending();
  start_line(row, done);
}

void OpenAIBatchOutput::finish() { write_pending(); }

void OpenAIBatchOutput::write_pending() {
  if (!pending_.is_null()) out_ << pending_.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  pending_ = nullptr;
}

void OpenAIBatchOutput::start_line(const RowResult& row, bool done) {
  std::string line;
  RequestInfo req;
  const bool have_line = input_.next(line);
  if (have_line) req = request_info(line);
  samples_left_ = have_line && job_.samples ? samples_of_line(line, job_.sample_job) - 1 : 0;
  const int64_t line_no = have_line ? input_.lines_read() - 1 : job_.samples ? row.line : row.index;
  pending_chat_ = req.chat;
  const std::string n = job_.job_id.empty() ? std::to_string(line_no) : job_.job_id + "-" + std::to_string(line_no);
  const std::string model = req.model.empty() ? job_.model_name : req.model;
  ojson j;
  j["id"] = "batch_req_" + n;
  // A row the job never finished has no id stored: its input line's, so it can be sent again.
  j["custom_id"] = done || !have_line ? row.id : input_line_id(line, line_no, job_.id_field);
  if (!done) {
    j["response"] = nullptr;
    j["error"] = not_computed_error();
  } else if (row.finish_reason == FinishReason::kError) {
    j["response"] = response(400, n, error_body(row.error));
    j["error"] = nullptr;
  } else if (job_.embed) {
    j["response"] = response(200, n, embedding_body(row, model));
    j["error"] = nullptr;
  } else {
    ojson body;
    body["id"] = (req.chat ? "chatcmpl-" : "cmpl-") + n;
    body["object"] = req.chat ? "chat.completion" : "text_completion";
    body["created"] = job_.created;
    body["model"] = model;
    body["choices"] = ojson::array({openai_choice(req.chat, job_.reasoning, 0, row, names_)});
    const size_t prompt = row.prompt_tokens.size(), output = row.output_tokens.size();
    body["usage"] = {{"prompt_tokens", prompt}, {"completion_tokens", output}, {"total_tokens", prompt + output}};
    j["response"] = response(200, n, std::move(body));
    j["error"] = nullptr;
  }
  pending_ = std::move(j);
}

// A further sample of the pending line: one more choice, or the whole line not computed / an error
// when this sample is (a line's samples fail together: they share the prompt).
void OpenAIBatchOutput::add_sample(const RowResult& row, bool done) {
  ojson& j = pending_;
  if (!j["error"].is_null() || j["response"]["status_code"] != 200) return;  // already failed
  if (!done) {
    j["response"] = nullptr;
    j["error"] = not_computed_error();
    return;
  }
  ojson& body = j["response"]["body"];
  body["choices"].push_back(openai_choice(pending_chat_, job_.reasoning, row.sample, row, names_));
  const size_t completion = body["usage"]["completion_tokens"].get<size_t>() + row.output_tokens.size();
  body["usage"]["completion_tokens"] = completion;
  body["usage"]["total_tokens"] = body["usage"]["prompt_tokens"].get<size_t>() + completion;
}

}  // namespace tpbatch

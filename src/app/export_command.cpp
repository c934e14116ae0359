#include "app/export_command.h"

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "common/error.h"
#include "common/log.h"
#include "io/finish_reason.h"
#include "io/input_row.h"
#include "job/job_spec.h"
#include "io/optional_datasets.h"
#include "io/output_paths.h"
#include "io/results_file.h"
#include "io/results_hdf5.h"
#include "tokenizer/tokenizer.h"

namespace tpbatch {
namespace {

using namespace h5;
using ojson = nlohmann::ordered_json;

// Reads rows [start, start+count) of the results file's datasets.
class RowsReader {
 public:
  RowsReader(hid_t file, const std::string& path) : f_(file), path_(path) {
    for (int d = 0; d < kNumDs; ++d) {
      if (added_later(d) && H5Lexists(f_, kDsNames[d], H5P_DEFAULT) <= 0) continue;  // an older file: rows empty
      ds_[d] = H5Handle(check(H5Dopen2(f_, kDsNames[d], H5P_DEFAULT), path_, std::string("no dataset '/") + kDsNames[d] + "'"),
                        H5Dclose);
    }
    H5Handle sp(H5Dget_space(ds_[kDone]), H5Sclose);
    H5Sget_simple_extent_dims(sp, &rows_, nullptr);
  }
  hsize_t rows() const { return rows_; }

  std::vector<std::string> strings(int d, hsize_t start, hsize_t count) {
    std::vector<char*> buf(count, nullptr);
    Sel s(ds_[d], start, count);
    check(H5Dread(ds_[d], t_.str, s.m, s.f, H5P_DEFAULT, buf.data()), path_, what(d));
    std::vector<std::string> out(count);
    for (hsize_t i = 0; i < count; ++i) out[i] = buf[i] ? buf[i] : "";
    H5Dvlen_reclaim(t_.str, s.m, H5P_DEFAULT, buf.data());
    return out;
  }
  template <typename T>
  std::vector<std::vector<T>> vlen(int d, hsize_t start, hsize_t count, hid_t mem) {
    if (!ds_[d].valid()) return std::vector<std::vector<T>>(count);
    std::vector<hvl_t> buf(count, hvl_t{0, nullptr});
    Sel s(ds_[d], start, count);
    check(H5Dread(ds_[d], mem, s.m, s.f, H5P_DEFAULT, buf.data()), path_, what(d));
    std::vector<std::vector<T>> out(count);
    for (hsize_t i = 0; i < count; ++i) {
      const T* p = static_cast<const T*>(buf[i].p);
      out[i].assign(p, p + buf[i].len);
    }
    H5Dvlen_reclaim(mem, s.m, H5P_DEFAULT, buf.data());
    return out;
  }
  template <typename T>
  std::vector<T> scalars(int d, hsize_t start, hsize_t count, hid_t mem) {
    std::vector<T> out(count);
    Sel s(ds_[d], start, count);
    check(H5Dread(ds_[d], mem, s.m, s.f, H5P_DEFAULT, out.data()), path_, what(d));
    return out;
  }
  const Types& types() const { return t_; }

 private:
  struct Sel {
    H5Handle f, m;
    Sel(hid_t ds, hsize_t start, hsize_t count)
        : f(H5Dget_space(ds), H5Sclose), m(H5Screate_simple(1, &count, nullptr), H5Sclose) {
      H5Sselect_hyperslab(f, H5S_SELECT_SET, &start, nullptr, &count, nullptr);
    }
  };
  std::string what(int d) const { return std::string("cannot read dataset '/") + kDsNames[d] + "'"; }
  hid_t f_;
  std::string path_;
  Types t_;
  H5Handle ds_[kNumDs];
  hsize_t rows_ = 0;
};

// What the OpenAI output needs from an input line: its url and body.model.
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

// The strings of token ids in the logprobs: each token's own text, decoded with the model's
// tokenizer (the model folder the results file names), and its UTF-8 bytes; when the folder or its
// tokenizer.json cannot be read, "token_id:<id>" (vLLM's return_tokens_as_token_ids) and no bytes,
// said once on standard error. The tokenizer is loaded on first use: exports without logprobs never
// read it.
class TokenNames {
 public:
  explicit TokenNames(std::vector<std::pair<std::string, std::string>> model_dirs) : dirs_(std::move(model_dirs)) {}

  std::string text(int32_t id) {
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
  ojson bytes(const std::string& text) {
    if (!tokenizer()) return nullptr;
    ojson out = ojson::array();
    for (unsigned char c : text) out.push_back(static_cast<int>(c));
    return out;
  }

 private:
  const Tokenizer* tokenizer() {
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
  std::vector<std::pair<std::string, std::string>> dirs_;  // places_of the model folder
  std::unique_ptr<Tokenizer> tok_;
  bool tried_ = false;
};

// OpenAI's logprobs of a choice, for rows that asked for top_logprobs (else null): each token's text
// and bytes (TokenNames); a chosen token's own logprob is null when the job stored none
// (output.logprobs: false).
ojson openai_logprobs(bool chat, const std::vector<int32_t>& tokens, const std::vector<float>& logprobs,
                      const std::vector<int32_t>& top_ids, const std::vector<float>& top_lps, TokenNames& names) {
  if (top_ids.empty() || tokens.empty() || top_ids.size() % tokens.size() != 0) return nullptr;
  const size_t k = top_ids.size() / tokens.size();
  auto own = [&](size_t pos) -> ojson { return pos < logprobs.size() ? ojson(logprobs[pos]) : ojson(nullptr); };
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

// One choice of a completion: sample `index` of its line.
ojson openai_choice(bool chat, int32_t index, const std::string& finish, const std::string& text,
                    const std::vector<int32_t>& tokens, const std::vector<float>& logprobs,
                    const std::vector<int32_t>& top_ids, const std::vector<float>& top_lps, TokenNames& names) {
  ojson choice;
  choice["index"] = index;
  if (chat) choice["message"] = {{"role", "assistant"}, {"content", text}};
  else choice["text"] = text;
  choice["logprobs"] = openai_logprobs(chat, tokens, logprobs, top_ids, top_lps, names);
  choice["finish_reason"] = std::string(openai_finish_reason(parse_finish_reason(finish)));
  return choice;
}

// Where a file the job named may be now, with how each place was found: as the job named it (from
// the working directory), where it lay relative to the job's output.path (so a folder moved or
// copied with its input and results in it still works), and its file name in the results file's
// folder.
std::vector<std::pair<std::string, std::string>> places_of(const std::string& stored, const std::string& output_path,
                                                           const std::string& results) {
  namespace fs = std::filesystem;
  if (stored.empty()) return {};
  const fs::path p(stored), folder = fs::path(results).parent_path();
  std::vector<std::pair<std::string, std::string>> out = {{stored, "as the job named it"}};
  const fs::path job_out_folder = fs::path(output_path).parent_path();
  if (!output_path.empty() && p.is_absolute() == job_out_folder.is_absolute()) {
    const fs::path rel = p.lexically_relative(job_out_folder.empty() ? fs::path(".") : job_out_folder);
    if (!rel.empty()) out.emplace_back((folder / rel).lexically_normal().string(), "where it lay relative to the results file");
  }
  out.emplace_back((folder / p.filename()).string(), "beside the results file");
  return out;
}

// The job's input for an openai export, and how it was found: --input; else the first of the
// places the results file points at (its `input_path` attribute, where the run read it; the job's
// input.path, see places_of) holding the file the rows were computed from (its fingerprint).
struct FoundInput {
  std::string path, how;
};
FoundInput find_input(const ExportOptions& o, hid_t f, const std::string& stored, const std::string& output_path) {
  const std::string there = has_attr(f, "input_fingerprint") ? read_attr_str(f, "input_fingerprint", o.results) : "";
  auto fingerprint = [](const std::string& path) {
    try {
      return input_fingerprint(path);
    } catch (const Error&) {
      return std::string();
    }
  };
  auto not_the_one = [&](const std::string& path, const std::string& here) {
    return "input file '" + path + "' is not the one '" + o.results + "' was computed from (its fingerprint is " +
           here + ", the results were computed from " + there + "): its lines would label other rows";
  };
  if (!o.input.empty()) {
    if (!there.empty()) {
      std::string here;
      try {
        here = input_fingerprint(o.input);
      } catch (const Error& e) {
        throw JobError(std::string(e.what()) + " (--input names the job's input file)");
      }
      if (here != there) throw JobError(not_the_one(o.input, here) + "; give --input with the job's input file as it was");
    }
    return {o.input, "--input"};
  }
  std::vector<std::pair<std::string, std::string>> places;  // path, how it was found
  if (has_attr(f, "input_path"))
    places.emplace_back(read_attr_str(f, "input_path", o.results), "where the job read it");
  for (auto& place : places_of(stored, output_path, o.results)) places.push_back(std::move(place));
  if (places.empty()) throw JobError("'" + o.results + "' does not name its input file: give --input FILE.jsonl");
  std::string tried, mismatch;
  std::error_code ec;
  for (const auto& [path, how] : places) {
    if (tried.find("'" + path + "'") != std::string::npos) continue;
    tried += (tried.empty() ? "'" : ", '") + path + "'";
    if (!std::filesystem::is_regular_file(path, ec)) continue;
    const std::string here = fingerprint(path);
    if (there.empty() || here == there) return {path, how};
    if (mismatch.empty()) mismatch = not_the_one(path, here);
  }
  if (!mismatch.empty())
    throw JobError(mismatch + " (looked at " + tried + "); give --input with the job's input file as it was");
  throw JobError("cannot find the job's input file (looked at " + tried + "); give --input FILE.jsonl");
}

}  // namespace

int run_export(const ExportOptions& o, std::ostream& stdout_stream) {
  quiet_hdf5();
  std::error_code ec;
  if (!std::filesystem::exists(o.results, ec)) throw JobError("results file '" + o.results + "' not found");
  htri_t is = H5Fis_hdf5(o.results.c_str());
  H5Eclear2(H5E_DEFAULT);
  if (is <= 0) throw JobError("'" + o.results + "' is not an HDF5 file");
  H5Handle fapl = file_access_plist();
  H5Handle f(check(H5Fopen(o.results.c_str(), H5F_ACC_RDONLY, fapl), o.results, "cannot open"), H5Fclose);
  if (!has_attr(f, "format_version")) throw JobError("'" + o.results + "' is not a tpbatch results file");
  const std::string task = has_attr(f, "task") ? read_attr_str(f, "task", o.results) : "generate";
  const std::string model = has_attr(f, "model") ? read_attr_str(f, "model", o.results) : "";
  const bool openai = o.format == "openai";
  if (openai && task != "generate" && task != "embed")
    throw JobError("--format openai needs the results of a generate or embed job; '" + o.results + "' is task: " + task);

  // The job's input: an openai export reads it; no export may write over it.
  std::string in_path, id_field = "id", output_path;  // the job's input.path, input.id_field, output.path
  JobSpec sample_job;  // what samples_of_line reads: the task and sampling.n
  sample_job.task = task == "generate" ? Task::kGenerate : task == "embed" ? Task::kEmbed : Task::kScore;
  if (has_attr(f, "job_yaml")) {
    try {
      const YAML::Node y = YAML::Load(read_attr_str(f, "job_yaml", o.results));
      if (y["input"] && y["input"]["path"]) in_path = y["input"]["path"].as<std::string>();
      if (y["input"] && y["input"]["id_field"]) id_field = y["input"]["id_field"].as<std::string>();
      if (y["output"] && y["output"]["path"]) output_path = y["output"]["path"].as<std::string>();
      if (y["sampling"] && y["sampling"]["n"]) sample_job.sampling.n = y["sampling"]["n"].as<int64_t>();
    } catch (const YAML::Exception&) {
    }
  }
  if (!o.input.empty()) in_path = o.input;
  std::optional<JsonlReader> input;
  if (openai) {
    // Each output line takes its kind, model and (for rows never run) custom_id from its input
    // line: only the input the rows were computed from may label them.
    const FoundInput found = find_input(o, f, in_path, output_path);
    in_path = found.path;
    log_info("export: the job's input is '%s' (%s)", in_path.c_str(), found.how.c_str());
  }
  const bool to_stdout = o.output.empty() || o.output == "-";
  if (!to_stdout) {
    const OutputPaths results = output_paths(o.results);
    for (const std::string& read : {results.file, results.journal, results.partial, in_path})
      if (!read.empty() && same_file(o.output, read))
        throw JobError("export --output '" + o.output + "' is '" + read + "', which export reads (" +
                       (read == in_path ? "the job's input file" : "the results file or its companions") +
                       "): writing it would destroy it; choose another --output");
  }
  if (openai) input.emplace(in_path);

  std::ofstream file_out;
  if (!to_stdout) {
    file_out.open(o.output, std::ios::binary | std::ios::trunc);
    if (!file_out) throw JobError("cannot write '" + o.output + "'");
  }
  std::ostream& out = to_stdout ? stdout_stream : file_out;
  // A stable "created" for every body: the results file's modification time.
  struct stat st {};
  const int64_t created = ::stat(o.results.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_mtime) : 0;
  const std::string model_name = std::filesystem::path(model).filename().string();
  // Request ids: batch_req_<job_id>-<line> (a file older than job ids: batch_req_<line>).
  const std::string job_id = read_job_id(f, o.results);
  TokenNames names(places_of(model, output_path, o.results));

  RowsReader r(f, o.results);
  // /embedding (task: embed) and /truncated_tokens (input.truncate: left), when the file has them.
  const OptionalDatasetSpec extra_spec = optional_datasets_in(f);
  OptionalDatasets extra(extra_spec, o.results);
  if (const std::string why = extra.open(f, static_cast<int64_t>(r.rows())); !why.empty())
    throw Error("results file '" + o.results + "': " + why);
  const bool embed = task == "embed";
  const Types& t = r.types();
  const hsize_t step = 1024;
  std::string line;
  ojson pending;             // openai: the current input line's output, written once its samples are in
  int64_t samples_left = 0;  // openai: rows of the pending line still to come
  bool pending_chat = false;
  // A further sample of the pending line: one more choice, or the whole line not computed / an
  // error when this sample is (a line's samples fail together: they share the prompt).
  auto add_choice = [&](ojson& j, bool row_done, const std::string& finish, const std::string& txt,
                        const std::vector<int32_t>& toks, const std::vector<float>& lps,
                        const std::vector<int32_t>& tids, const std::vector<float>& tlps, int32_t sample) {
    if (!j["error"].is_null() || j["response"]["status_code"] != 200) return;  // already failed
    if (!row_done) {
      j["response"] = nullptr;
      j["error"] = {{"code", "not_computed"},
                    {"message", "the job did not finish this row (run it again with output.if_exists: resume)"}};
      return;
    }
    ojson& body = j["response"]["body"];
    body["choices"].push_back(openai_choice(pending_chat, sample, finish, txt, toks, lps, tids, tlps, names));
    const size_t completion = body["usage"]["completion_tokens"].get<size_t>() + toks.size();
    body["usage"]["completion_tokens"] = completion;
    body["usage"]["total_tokens"] = body["usage"]["prompt_tokens"].get<size_t>() + completion;
  };
  for (hsize_t start = 0; start < r.rows(); start += step) {
    const hsize_t count = std::min(step, r.rows() - start);
    const auto ids = r.strings(kId, start, count);
    const auto done = r.scalars<uint8_t>(kDone, start, count, H5T_NATIVE_UINT8);
    const auto fin = r.strings(kFinish, start, count);
    std::vector<RowResult> extras(count);
    for (hsize_t i = 0; i < count; ++i) extras[i].finish_reason = parse_finish_reason(fin[i]);
    extra.read(static_cast<int64_t>(start), static_cast<int64_t>(count), extras);
    const auto err = r.strings(kError, start, count);
    const auto text = r.strings(kText, start, count);
    const auto pt = r.vlen<int32_t>(kPrompt, start, count, t.vi32_mem);
    const auto ot = r.vlen<int32_t>(kOutput, start, count, t.vi32_mem);
    std::vector<std::vector<float>> lp = r.vlen<float>(kLogprobs, start, count, t.vf32_mem);
    const auto top_ids = r.vlen<int32_t>(kTopIds, start, count, t.vi32_mem);
    const auto top_lps = r.vlen<float>(kTopLogprobs, start, count, t.vf32_mem);
    std::vector<double> lps;
    std::vector<uint8_t> greedy;
    if (!openai) {
      lps = r.scalars<double>(kLpSum, start, count, H5T_NATIVE_DOUBLE);
      greedy = r.scalars<uint8_t>(kGreedy, start, count, H5T_NATIVE_UINT8);
    }
    for (hsize_t i = 0; i < count; ++i) {
      const int64_t row = static_cast<int64_t>(start + i);
      ojson j;
      if (!openai) {
        j["id"] = ids[i];
        j["done"] = done[i] != 0;
        j["finish_reason"] = fin[i];
        j["error"] = err[i];
        j["prompt_tokens"] = pt[i];
        j["output_tokens"] = ot[i];
        j["output_text"] = text[i];
        j["output_logprobs"] = lp[i];
        j["logprob_sum"] = lps[i];
        j["is_greedy"] = greedy[i] != 0;
        if (!top_ids[i].empty()) {
          j["top_logprob_tokens"] = top_ids[i];
          j["top_logprobs"] = top_lps[i];
        }
        if (embed) j["embedding"] = extras[i].embedding;
        if (extra_spec.truncated_tokens) j["truncated_tokens"] = extras[i].truncated_tokens;
        if (extra_spec.samples) j["input_line"] = extras[i].line, j["sample"] = extras[i].sample;
        out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
        continue;
      }
      // One output line per input line: a line's further samples (n > 1) are more choices of it. How
      // many rows a line has comes from the line itself (samples_of_line), as when the job ran: a
      // row never finished has no /input_line or /sample of its own.
      if (samples_left > 0 && !pending.is_null()) {
        --samples_left;
        add_choice(pending, done[i] != 0, fin[i], text[i], ot[i], lp[i], top_ids[i], top_lps[i], extras[i].sample);
        continue;
      }
      if (!pending.is_null()) out << pending.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      pending = nullptr;
      RequestInfo req;
      const bool have_line = input->next(line);
      if (have_line) req = request_info(line);
      samples_left = have_line && extra_spec.samples ? samples_of_line(line, sample_job) - 1 : 0;
      const int64_t line_no = have_line ? input->lines_read() - 1 : extra_spec.samples ? extras[i].line : row;
      pending_chat = req.chat;
      const std::string n = job_id.empty() ? std::to_string(line_no) : job_id + "-" + std::to_string(line_no);
      j["id"] = "batch_req_" + n;
      // A row the job never finished has no id stored: its input line's, so it can be sent again.
      j["custom_id"] = done[i] || !have_line ? ids[i] : input_line_id(line, line_no, id_field);
      if (!done[i]) {
        j["response"] = nullptr;
        j["error"] = {{"code", "not_computed"},
                      {"message", "the job did not finish this row (run it again with output.if_exists: resume)"}};
      } else if (parse_finish_reason(fin[i]) == FinishReason::kError) {
        j["response"] = {{"status_code", 400},
                         {"request_id", "req_" + n},
                         {"body", {{"error", {{"message", err[i]}, {"type", "invalid_request_error"},
                                              {"param", nullptr}, {"code", nullptr}}}}}};
        j["error"] = nullptr;
      } else if (embed) {  // the /v1/embeddings response
        ojson item;
        item["object"] = "embedding";
        item["index"] = 0;
        item["embedding"] = extras[i].embedding;
        ojson body;
        body["object"] = "list";
        body["data"] = ojson::array({item});
        body["model"] = req.model.empty() ? model_name : req.model;
        body["usage"] = {{"prompt_tokens", pt[i].size()}, {"total_tokens", pt[i].size()}};
        j["response"] = {{"status_code", 200}, {"request_id", "req_" + n}, {"body", body}};
        j["error"] = nullptr;
      } else {
        const ojson choice = openai_choice(req.chat, 0, fin[i], text[i], ot[i], lp[i], top_ids[i], top_lps[i], names);
        ojson body;
        body["id"] = (req.chat ? "chatcmpl-" : "cmpl-") + n;
        body["object"] = req.chat ? "chat.completion" : "text_completion";
        body["created"] = created;
        body["model"] = req.model.empty() ? model_name : req.model;
        body["choices"] = ojson::array({choice});
        body["usage"] = {{"prompt_tokens", pt[i].size()},
                         {"completion_tokens", ot[i].size()},
                         {"total_tokens", pt[i].size() + ot[i].size()}};
        j["response"] = {{"status_code", 200}, {"request_id", "req_" + n}, {"body", body}};
        j["error"] = nullptr;
      }
      pending = std::move(j);
    }
  }
  if (!pending.is_null()) out << pending.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  out.flush();
  if (!out) throw Error("writing the export failed" + (to_stdout ? std::string() : " ('" + o.output + "')"));
  return kExitOk;
}

}  // namespace tpbatch

// A whole batch job over the scheduler and FakeModel (tests/unit/engine/fake_model.h) with a
// byte-level tokenizer (one token per ASCII byte): one result line per input line, errors with
// their codes, results independent of the batch, --ordered, stop strings and ids, and a job
// stopped early then resumed ends with exactly the results of an uninterrupted run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "../engine/fake_model.h"
#include "../temp_dir.h"
#include "../text/text_test_util.h"
#include "batch/batch_job.h"
#include "batch/h5_results.h"

namespace qmpi {
namespace {

using json = nlohmann::json;
using testing::TempDir;

constexpr int64_t kVocab = 128;  // the fake samples ASCII bytes only: text is exact
constexpr int32_t kEos = 10;     // '\n' ends a sequence unless ignore_eos

const Tokenizer& bytes_tokenizer() {
  static const Tokenizer t = test::from(test::tiny_tokenizer({}));
  return t;
}

struct JobSetup {
  int64_t blocks = 512;
  int block_size = 4;
  int64_t max_num_seqs = 4;
  int64_t max_batched_tokens = 48;
  int64_t max_model_len = 400;
  bool ordered = false;
  bool resume = false;
  bool h5 = false;
  int stop_after = -1;  // stop_requested turns true after this many polls
  size_t max_line_bytes = kDefaultMaxLineBytes;
};

struct JobRun {
  std::vector<json> lines;
  BatchSummary summary;
};

std::vector<json> read_lines(const std::string& path) {
  std::vector<json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) out.push_back(json::parse(line));
  return out;
}

JobRun run_job(const TempDir& dir, const std::vector<std::string>& input, const JobSetup& s) {
  const std::string in_path = dir.file("in.jsonl"), out_path = dir.file("out.jsonl");
  {
    std::ofstream in(in_path);
    for (const auto& l : input) in << l << "\n";
  }
  test::FakeModel fake(s.blocks, s.block_size, kVocab);
  BlockManager blocks(s.blocks, s.block_size);
  SchedulerConfig cfg;
  cfg.max_num_seqs = s.max_num_seqs;
  cfg.max_batched_tokens = s.max_batched_tokens;
  cfg.max_model_len = s.max_model_len;
  Scheduler sched(fake, blocks, cfg);
  Qwen25ChatTemplate chat;
  ModelFacts model;
  model.tokenizer = &bytes_tokenizer();
  model.chat = &chat;
  model.gen.do_sample = false;
  model.eos_ids = {kEos};
  model.max_model_len = s.max_model_len;
  model.vocab_size = 256;
  BatchJobOptions opts;
  opts.input = in_path;
  opts.output = out_path;
  opts.output_h5 = s.h5 ? dir.file("out.h5") : "";
  opts.ordered = s.ordered;
  opts.resume = s.resume;
  opts.overwrite = !s.resume;
  opts.token_ids = true;
  opts.model_name = "fake";
  opts.progress_interval_s = 1e9;
  opts.max_line_bytes = s.max_line_bytes;
  int polls = 0;
  JobRun r;
  r.summary = run_batch_job(opts, model, sched,
                            [&] { return s.stop_after >= 0 && ++polls > s.stop_after; });
  r.lines = read_lines(out_path);
  return r;
}

// A line from an id, a prompt and extra fields written as JSON text.
std::string line(const std::string& id, const std::string& prompt, const std::string& extra = "") {
  json j = extra.empty() ? json::object() : json::parse("{" + extra + "}");
  j["id"] = id;
  j["prompt"] = prompt;
  return j.dump();
}

std::string fmt_id(const char* prefix, int i) {
  std::string s = prefix;
  s += std::to_string(i);
  return s;
}

std::vector<std::string> mixed_input() {
  std::vector<std::string> in;
  for (int i = 0; i < 18; ++i) {
    json extra = {{"max_tokens", 3 + i % 9}};
    if (i % 3 == 0) extra["ignore_eos"] = true;
    if (i % 4 == 1) extra["temperature"] = 0.9;
    const std::string fields = extra.dump();
    in.push_back(
        line(fmt_id("r", i), fmt_id("prompt number ", i * 7), fields.substr(1, fields.size() - 2)));
  }
  in.push_back(json({{"custom_id", "chat"},
                     {"url", "/v1/chat/completions"},
                     {"body",
                      {{"messages", {{{"role", "user"}, {"content", "hello"}}}},
                       {"max_tokens", 6},
                       {"logprobs", true},
                       {"top_logprobs", 2}}}})
                   .dump());
  in.push_back(line("n3", "several choices", "\"n\": 3, \"max_tokens\": 5, \"temperature\": 1"));
  in.push_back("{\"id\": \"broken\", ");                                    // invalid JSON
  in.push_back(line("typo", "x", "\"temprature\": 0"));                     // unknown field
  in.push_back(line("hot", "x", "\"temperature\": -1"));                    // bad sampling
  in.push_back(line("long", std::string(390, 'a'), "\"max_tokens\": 20"));  // too long
  in.push_back("");                                                         // blank: skipped
  in.push_back(line("r3", "again", ""));                                    // duplicate id
  in.push_back(R"({"id": "ids", "prompt": [72, 105], "max_tokens": 4})");
  return in;
}

std::map<std::string, json> by_id(const std::vector<json>& lines) {
  std::map<std::string, json> m;
  for (const auto& l : lines) {
    EXPECT_FALSE(m.count(l["custom_id"].get<std::string>())) << "duplicate " << l["custom_id"];
    m[l["custom_id"].get<std::string>()] = l;
  }
  return m;
}

// The parts of a result that must not depend on batching or interruptions.
json essence(const json& l) {
  if (!l["error"].is_null()) return l["error"];
  json body = l["response"]["body"];
  body.erase("created");
  return body;
}

TEST(BatchJob, OneLinePerInputLineWithErrorsInPlace) {
  TempDir dir;
  const auto input = mixed_input();
  const JobRun r = run_job(dir, input, JobSetup{});
  ASSERT_EQ(r.lines.size(), input.size() - 1) << "one line per non-blank input line";
  const auto m = by_id(r.lines);
  const auto code = [&](const std::string& id) { return m.at(id)["error"]["code"]; };
  EXPECT_EQ(code("qmpi-line-21"), "QM500");  // the broken line has no readable id
  EXPECT_EQ(code("typo"), "QM501");
  EXPECT_EQ(code("hot"), "QM503");
  EXPECT_EQ(code("long"), "QM502");
  EXPECT_EQ(code("qmpi-line-26"), "QM501");  // the second "r3"
  EXPECT_THAT(m.at("long")["error"]["message"].get<std::string>(),
              ::testing::HasSubstr("max-model-len"));
  EXPECT_TRUE(m.at("long")["response"].is_null()) << "OpenAI's Batch API: no response, an error";
  EXPECT_EQ(r.summary.counts.ok, 21);
  EXPECT_EQ(r.summary.counts.failed, 5);

  for (const auto& [id, l] : m) {
    if (!l["error"].is_null()) continue;
    const json& body = l["response"]["body"];
    EXPECT_EQ(l["response"]["status_code"], 200);
    int64_t generated = 0;
    for (const auto& c : body["choices"]) {
      const auto ids = c["token_ids"].get<std::vector<int32_t>>();
      generated += int64_t(ids.size());
      std::string want;
      for (int32_t t : ids) want += char(t);
      if (c["finish_reason"] == "stop") {  // eos: its text is left out
        EXPECT_EQ(ids.back(), kEos) << id;
        want.pop_back();
      }
      const std::string text = body["object"] == "chat.completion"
                                   ? c["message"]["content"].get<std::string>()
                                   : c["text"].get<std::string>();
      EXPECT_EQ(text, want) << id;
    }
    EXPECT_EQ(body["usage"]["completion_tokens"], generated) << id;
    EXPECT_EQ(body["usage"]["prompt_tokens"], body["prompt_token_ids"].size()) << id;
  }
  EXPECT_EQ(m.at("n3")["response"]["body"]["choices"].size(), 3u);
  EXPECT_NE(m.at("n3")["response"]["body"]["choices"][0]["token_ids"],
            m.at("n3")["response"]["body"]["choices"][1]["token_ids"])
      << "choices sample with seeds of their own";
  const json& chat = m.at("chat")["response"]["body"];
  EXPECT_EQ(chat["object"], "chat.completion");
  const json& lp = chat["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(lp.size(), chat["choices"][0]["token_ids"].size());
  EXPECT_EQ(lp[0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(m.at("ids")["response"]["body"]["prompt_token_ids"], json({72, 105}));
  EXPECT_EQ(m.at("r0")["response"]["body"]["model"], "fake");
}

TEST(BatchJob, ALineOverMaxLineBytesIsAnErrorRecordAndTheJobGoesOn) {
  TempDir dir;
  JobSetup s;
  s.max_line_bytes = 200;
  const std::string huge = line("huge", std::string(5000, 'h'), "\"max_tokens\": 2");
  const std::string fits = line("fits", std::string(150, 'f'), "\"max_tokens\": 2");
  const JobRun r = run_job(dir, {line("a", "x", "\"max_tokens\": 2"), huge, fits}, s);
  const auto m = by_id(r.lines);
  ASSERT_EQ(m.size(), 3u);
  // The id inside the long line is never read: the record takes the line's generated id.
  const json& err = m.at("qmpi-line-2")["error"];
  EXPECT_EQ(err["code"], "QM506");
  EXPECT_THAT(err["message"].get<std::string>(), ::testing::HasSubstr(std::to_string(huge.size())));
  EXPECT_TRUE(m.at("a")["error"].is_null());
  EXPECT_TRUE(m.at("fits")["error"].is_null());
  EXPECT_EQ(r.summary.counts.total, 3);
  EXPECT_EQ(r.summary.counts.failed, 1);
}

TEST(BatchJob, ResultsDoNotDependOnBatchingOrPreemption) {
  TempDir a, b;
  const auto input = mixed_input();
  JobSetup one;
  one.max_num_seqs = 1;
  JobSetup tight;
  tight.blocks = 45;  // the chat prompt alone needs ~40 blocks: preemption is certain
  tight.max_num_seqs = 6;
  tight.max_batched_tokens = 7;
  const auto alone = by_id(run_job(a, input, one).lines);
  const JobRun batched = run_job(b, input, tight);
  EXPECT_GT(batched.summary.stats.preemptions, 0);
  const auto got = by_id(batched.lines);
  ASSERT_EQ(got.size(), alone.size());
  for (const auto& [id, l] : alone) EXPECT_EQ(essence(got.at(id)), essence(l)) << id;
}

TEST(BatchJob, OrderedKeepsInputOrder) {
  TempDir dir;
  const auto input = mixed_input();
  JobSetup s;
  s.ordered = true;
  const JobRun r = run_job(dir, input, s);
  std::vector<int64_t> lines;
  for (const auto& l : r.lines) lines.push_back(std::stoll(l["id"].get<std::string>().substr(10)));
  ASSERT_EQ(lines.size(), input.size() - 1);
  EXPECT_TRUE(std::is_sorted(lines.begin(), lines.end()));
}

TEST(BatchJob, StoppedEarlyThenResumedGivesEveryResultOnce) {
  TempDir full_dir, dir;
  const auto input = mixed_input();
  const auto full = by_id(run_job(full_dir, input, JobSetup{}).lines);
  for (bool ordered : {false, true}) {
    JobSetup s;
    s.ordered = ordered;
    s.h5 = true;
    s.stop_after = 3;
    const JobRun first = run_job(dir, input, s);
    EXPECT_TRUE(first.summary.drained);
    EXPECT_GT(first.summary.left_for_resume, 0) << "the test should stop the job early";
    EXPECT_LT(first.lines.size(), full.size());
    // A kill in the middle of a write leaves a torn line; resume cuts it off.
    {
      std::ofstream out(dir.file("out.jsonl"), std::ios::app);
      out << R"({"id":"batch_req_99","custom_id":"r17","resp)";
    }
    s.resume = true;
    s.stop_after = 6;
    run_job(dir, input, s);
    s.stop_after = -1;
    const JobRun last = run_job(dir, input, s);
    EXPECT_EQ(last.summary.left_for_resume, 0);
    const auto got = by_id(last.lines);
    ASSERT_EQ(got.size(), full.size()) << (ordered ? "ordered" : "unordered");
    for (const auto& [id, l] : full) EXPECT_EQ(essence(got.at(id)), essence(l)) << id;
    // The HDF5 file grew with each run and holds a row per choice of every result.
    std::unordered_set<std::string> ok_ids;
    int64_t choices = 0;
    for (const auto& [id, l] : got)
      if (l["error"].is_null()) {
        ok_ids.insert(id);
        choices += int64_t(l["response"]["body"]["choices"].size());
      }
    const H5Results h5(dir.file("out.h5"), true);
    EXPECT_EQ(h5.existing_ids(), ok_ids);
    EXPECT_EQ(h5.rows(), choices);
  }
}

// Issue 19, item 4: ids the job makes up never collide with the input's own ids, and a job cut
// after any number of lines and resumed answers every line exactly once.
TEST(BatchJob, GeneratedIdsNeverCollideAndResumeKeysOnThem) {
  const std::vector<std::vector<std::string>> inputs = {
      // The hostile run's input: line-N ids are ordinary ids now.
      {"{\"id\": \"broken\", ", line("line-1", "a"), line("x3", "b"), line("x3", "c"),
       line("line-4", "d")},
      // The reserved form: allowed on its own line only.
      {"{\"id\": \"broken\", ", line("qmpi-line-1", "a"), line("x3", "b"), line("x3", "c"),
       line("qmpi-line-4", "d"), line("qmpi-line-6", "e")},
  };
  const std::vector<std::map<std::string, std::string>> want = {
      {{"qmpi-line-1", "QM500"},
       {"line-1", ""},
       {"x3", ""},
       {"qmpi-line-4", "QM501"},
       {"line-4", ""}},
      {{"qmpi-line-1", "QM500"},
       {"qmpi-line-2", "QM501"},
       {"x3", ""},
       {"qmpi-line-4", "QM501"},
       {"qmpi-line-5", "QM501"},
       {"qmpi-line-6", ""}},
  };
  for (size_t k = 0; k < inputs.size(); ++k) {
    TempDir dir;
    const JobRun full = run_job(dir, inputs[k], JobSetup{});
    ASSERT_EQ(full.lines.size(), inputs[k].size());
    std::map<std::string, std::string> got;
    for (const json& l : full.lines)
      got[l["custom_id"]] = l["error"].is_null() ? "" : l["error"]["code"].get<std::string>();
    EXPECT_EQ(got, want[k]) << "input " << k;
    const std::vector<json> full_lines = read_lines(dir.file("out.jsonl"));
    // Cut the results after every possible line, resume, and count each id once.
    for (size_t cut = 0; cut <= full_lines.size(); ++cut) {
      {
        std::ofstream out(dir.file("out.jsonl"), std::ios::trunc);
        for (size_t i = 0; i < cut; ++i) out << full_lines[i].dump() << "\n";
      }
      JobSetup s;
      s.resume = true;
      const JobRun resumed = run_job(dir, inputs[k], s);
      std::map<std::string, std::string> again;
      for (const json& l : resumed.lines) {
        EXPECT_FALSE(again.count(l["custom_id"])) << "twice: " << l["custom_id"];
        again[l["custom_id"]] = l["error"].is_null() ? "" : l["error"]["code"].get<std::string>();
      }
      EXPECT_EQ(again, want[k]) << "input " << k << " cut after " << cut;
      EXPECT_EQ(resumed.summary.counts.skipped, int64_t(cut));
      EXPECT_EQ(resumed.summary.left_for_resume, 0);
    }
  }
}

TEST(BatchJob, StopStringsAndStopIds) {
  TempDir dir;
  const JobRun free_run = run_job(
      dir, {line("s", "stop here", "\"max_tokens\": 30, \"ignore_eos\": true")}, JobSetup{});
  const json& c0 = free_run.lines.at(0)["response"]["body"]["choices"][0];
  const std::string text = c0["text"];
  ASSERT_EQ(text.size(), 30u);
  const std::string stop = text.substr(11, 3);
  const auto ids = c0["token_ids"].get<std::vector<int32_t>>();
  const JobRun stopped =
      run_job(dir,
              {line("s", "stop here",
                    "\"max_tokens\": 30, \"ignore_eos\": true, \"stop\": " + json(stop).dump()),
               line("t", "stop here",
                    "\"max_tokens\": 30, \"ignore_eos\": true, \"stop_token_ids\": [" +
                        std::to_string(ids[7]) + "]")},
              JobSetup{});
  const auto m = by_id(stopped.lines);
  const json& cs = m.at("s")["response"]["body"]["choices"][0];
  EXPECT_EQ(cs["finish_reason"], "stop");
  EXPECT_EQ(cs["text"], text.substr(0, text.find(stop)));
  EXPECT_EQ(cs["token_ids"].size(), text.find(stop) + stop.size())
      << "generation ends at the token that completes the stop string";
  const json& ct = m.at("t")["response"]["body"]["choices"][0];
  const size_t first = size_t(std::find(ids.begin(), ids.end(), ids[7]) - ids.begin());
  EXPECT_EQ(ct["finish_reason"], "stop");
  EXPECT_EQ(ct["token_ids"].size(), first + 1);
  EXPECT_EQ(ct["text"], text.substr(0, first)) << "the stop token's text is left out";
}

}  // namespace
}  // namespace qmpi

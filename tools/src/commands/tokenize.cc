// tokenize.cc: `mmpack tokenize` (commands.h): captions in, token ids out, with the tokenizer
// `mmpack build` would use. For checking a tokenizer file against its reference and for
// measuring its speed (tests/bench/tokenizer_bench.sh).
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <istream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "commands/commands.h"
#include "text/tokenizer.h"

namespace mm::pack {
namespace {

// CPU seconds of the calling thread (the rate line is per CPU-second: on a shared machine
// wall time measures the neighbours).
double ThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// One batch of captions tokenized by `threads` threads, each its own stride, then written as
// lines; `*cpu_seconds` gains the tokenizing threads' CPU time.
Status TokenizeBatch(const Tokenizer& tok, const std::vector<std::string>& captions, int max_tokens,
                     int threads, std::vector<std::string>* lines, double* cpu_seconds) {
  std::vector<std::vector<int32_t>> ids(captions.size());
  std::vector<Status> errors(threads);
  std::vector<double> cpu(threads, 0.0);
  auto work = [&](int t) {
    const double start = ThreadCpuSeconds();
    for (size_t i = t; i < captions.size(); i += threads) {
      auto r = tok.Encode(captions[i], max_tokens);
      if (!r.ok()) {
        errors[t] = r.status();
        break;
      }
      ids[i] = std::move(r->ids);
    }
    cpu[t] = ThreadCpuSeconds() - start;
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& th : pool) th.join();
  for (const Status& s : errors) MM_RETURN_NOT_OK(s);
  for (double c : cpu) *cpu_seconds += c;
  lines->resize(captions.size());
  for (size_t i = 0; i < captions.size(); ++i) (*lines)[i] = nlohmann::json(ids[i]).dump();
  return Status::OK();
}

}  // namespace

Status RunTokenize(const TokenizeOptions& o, std::istream& in, std::ostream& out) {
  MM_ASSIGN_OR_RETURN(auto tok, Tokenizer::FromFile(o.tokenizer));
  const int max_tokens = o.max_tokens > 0 ? o.max_tokens : (1 << 30);
  const int threads = std::max(1, o.threads);
  std::vector<std::string> captions, lines;
  std::string line;
  int64_t number = 0, total = 0;
  double seconds = 0;
  auto flush = [&]() -> Status {
    MM_RETURN_NOT_OK(TokenizeBatch(*tok, captions, max_tokens, threads, &lines, &seconds));
    for (const std::string& l : lines) out << l << '\n';
    total += static_cast<int64_t>(captions.size());
    captions.clear();
    return Status::OK();
  };
  while (std::getline(in, line)) {
    ++number;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_string()) {
      return Status::InvalidArgument("stdin line " + std::to_string(number) +
                                     ": not a JSON string");
    }
    captions.push_back(j.get<std::string>());
    if (captions.size() >= 65536) MM_RETURN_NOT_OK(flush());
  }
  MM_RETURN_NOT_OK(flush());
  out.flush();
  if (!o.quiet) {
    std::fprintf(stderr, "mmpack tokenize: %lld captions in %.3f CPU s (%.0f captions/s, %s)\n",
                 static_cast<long long>(total), seconds, seconds > 0 ? total / seconds : 0.0,
                 std::string(mm::format::ToString(tok->kind())).c_str());
  }
  return Status::OK();
}

}  // namespace mm::pack

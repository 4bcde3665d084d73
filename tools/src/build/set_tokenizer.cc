// set_tokenizer.cc: see set_tokenizer.h.
#include "build/set_tokenizer.h"

#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mm/format.h"
#include "mm/internal/checksum.h"
#include "mm/internal/file.h"
#include "set/output_dir.h"
#include "text/normalize.h"
#include "text/tokenizer_sample.h"

namespace mm::pack {

namespace fs = std::filesystem;

namespace {

// The tokenizer in `model_bytes` (any kind, text/tokenizer.h): its SHA-256, and it loaded.
Result<SetTokenizer> TokenizerOf(std::string model_bytes, bool trained) {
  SetTokenizer out;
  out.sha256 = Sha256Hex(model_bytes);
  out.trained = trained;
  MM_ASSIGN_OR_RETURN(out.tokenizer, Tokenizer::FromSerialized(std::move(model_bytes)));
  return out;
}

// A SentencePiece unigram model trained on at most --tokenizer-sample of the good captions
// (a reservoir sample, text/tokenizer_sample.h), as the tokenizer will see them (--lowercase,
// --normalize): training memory is bounded whatever the input's size.
Result<std::string> TrainTokenizer(const BuildOptions& o, const SampleList& samples) {
  CaptionReservoir reservoir(o.tokenizer_sample);
  MM_RETURN_NOT_OK(ForEachSample(samples, [&](uint64_t, RawSample& s) -> Status {
    for (std::string& c : s.captions) {
      if (o.text.identity()) {
        reservoir.Add(std::move(c));
      } else {
        MM_ASSIGN_OR_RETURN(std::string n, NormalizeForTokenizer(c, o.text));
        reservoir.Add(std::move(n));
      }
    }
    return Status::OK();
  }));
  const int64_t seen = reservoir.seen();
  const std::vector<std::string> text = reservoir.Take();
  const std::vector<std::string_view> captions(text.begin(), text.end());
  if (!o.quiet) {
    std::fprintf(stderr,
                 "mmpack build: training a SentencePiece unigram tokenizer (vocab %d) on %zu "
                 "captions%s\n",
                 o.vocab_size, captions.size(),
                 static_cast<int64_t>(captions.size()) < seen
                     ? (" (a sample of " + std::to_string(seen) + ", --tokenizer-sample)").c_str()
                     : "");
  }
  std::string note;
  MM_ASSIGN_OR_RETURN(std::string model, Tokenizer::Train(captions, o.vocab_size, &note));
  if (!note.empty() && !o.quiet) std::fprintf(stderr, "mmpack build: %s\n", note.c_str());
  return model;
}

}  // namespace

Result<SetTokenizer> MakeTokenizer(const BuildOptions& o, const SampleList& samples,
                                   const fs::path& staging) {
  if (o.tokenizer == kNoTokenizer) return SetTokenizer();  // text only: no tokenizer file
  std::string model_bytes;
  bool trained = false;
  if (!o.tokenizer.empty()) {
    MM_RETURN_NOT_OK(ReadRegularFile(o.tokenizer, &model_bytes).WithContext("--tokenizer"));
  } else {
    MM_ASSIGN_OR_RETURN(model_bytes, TrainTokenizer(o, samples));
    trained = true;
  }
  auto tok = TokenizerOf(std::move(model_bytes), trained);
  if (!tok.ok()) return tok.status().WithContext(trained ? "trained tokenizer" : "--tokenizer");
  // The set carries the tokenizer's file as given, under its kind's name (mm/format.h).
  MM_RETURN_NOT_OK(WriteText(staging / tok->tokenizer->file_name(), tok->tokenizer->model_bytes()));
  return tok;
}

Result<SetTokenizer> OpenMadeTokenizer(const BuildOptions& o, const ResumeHeader& header,
                                       const fs::path& staging) {
  std::string model_bytes;
  if (!header.tokenizer_trained) {
    if (o.tokenizer == kNoTokenizer) return SetTokenizer();
    MM_RETURN_NOT_OK(ReadRegularFile(o.tokenizer, &model_bytes).WithContext("--tokenizer"));
    return TokenizerOf(std::move(model_bytes), false);
  }
  const fs::path model = staging / std::string(mm::format::kTokenizerFile);
  MM_RETURN_NOT_OK(ReadRegularFile(model.string(), &model_bytes).WithContext("--resume"));
  if (Sha256Hex(model_bytes) != header.tokenizer_sha256) {
    return Status::Corruption("--resume: " + model.string() +
                              " is not the tokenizer the interrupted build trained; run without "
                              "--resume to start over");
  }
  return TokenizerOf(std::move(model_bytes), true);
}

Result<SetTokenizer> ResumeTokenizer(const BuildOptions& o, const ResumeHeader& header,
                                     const SampleList& samples, const fs::path& staging) {
  if (!header.tokenizer_trained) return MakeTokenizer(o, samples, staging);
  return OpenMadeTokenizer(o, header, staging);
}

}  // namespace mm::pack

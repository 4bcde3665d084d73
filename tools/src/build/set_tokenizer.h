// set_tokenizer.h: the tokenizer a set is built with: a given file of any kind
// (text/tokenizer.h), one trained on the build's captions, or none (--tokenizer none); and the
// one an interrupted or split build already made, found again without training twice.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "build/options.h"
#include "build/resume.h"
#include "ingest/sample_list.h"
#include "mm/status.h"
#include "text/tokenizer.h"

namespace mm::pack {

/// The tokenizer of the set, and what index.json says of it.
struct SetTokenizer {
  std::unique_ptr<Tokenizer> tokenizer;  // null with --tokenizer none
  std::string sha256;                    // of the model bytes, as OUT/tokenizer.model holds them
  bool trained = false;                  // trained on the captions here
};

/// The set's tokenizer: --tokenizer's file, or (no --tokenizer) a SentencePiece unigram model
/// trained on at most --tokenizer-sample of `samples`' captions as the tokenizer sees them
/// (--lowercase, --normalize); written into `staging` under its kind's file name. Null for
/// --tokenizer none. Errors: IOError (the file), InvalidArgument (not a tokenizer of a known
/// kind; training failed).
[[nodiscard]] Result<SetTokenizer> MakeTokenizer(const BuildOptions& o, const SampleList& samples,
                                                 const std::filesystem::path& staging);

/// The tokenizer of the build `header` describes, written nowhere: the trained model it left in
/// `staging` (not trained again: training is not repeatable to the byte), or the given
/// --tokenizer, whose bytes the fingerprint already matched (or none). Errors: IOError,
/// Corruption (the model in `staging` is not the one `header` names).
[[nodiscard]] Result<SetTokenizer> OpenMadeTokenizer(const BuildOptions& o,
                                                     const ResumeHeader& header,
                                                     const std::filesystem::path& staging);

/// A resumed one-process build's tokenizer: OpenMadeTokenizer's, with a given model copied into
/// `staging` again (as MakeTokenizer does).
[[nodiscard]] Result<SetTokenizer> ResumeTokenizer(const BuildOptions& o,
                                                   const ResumeHeader& header,
                                                   const SampleList& samples,
                                                   const std::filesystem::path& staging);

}  // namespace mm::pack

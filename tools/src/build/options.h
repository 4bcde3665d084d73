// options.h: what `mmpack build` is asked to do, as main.cc parses the command line (and the
// Python module's build() passes it): BuildOptions, read by every stage of build/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "curate/filters.h"
#include "ingest/ingest.h"
#include "mm/format.h"
#include "shard/shard_writer.h"
#include "text/caption.h"
#include "text/normalize.h"
#include "text/tokenizer_sample.h"

namespace mm::pack {

/// `--tokenizer none`: captions are stored as text only, without token ids (for a training
/// loop that tokenizes with a tokenizer of its own); index.json's "tokenizer" is null.
inline constexpr const char* kNoTokenizer = "none";

/// `mmpack build RAW -o OUT` (ingest.cc, image_pipeline.cc, tokenizer.cc, build.cc).
struct BuildOptions {
  std::string input;   // RAW: folder, manifest file or tar
  std::string output;  // OUT directory
  InputFormat input_format = InputFormat::kAuto;
  bool overwrite = false;
  bool append = false;     // add RAW's samples to the existing set OUT (build_append.h)
  bool resume = false;     // continue the interrupted build in OUT.mmpack-partial (build_resume.h)
  std::string part;        // "I/N": build part I of N (build_parts.h); "auto": the launcher's
                           // (mpirun, srun) rank and size; "": one process
  int image_width = 224;   // pixels
  int image_height = 224;  // pixels
  format::ResizeMode resize_mode = format::ResizeMode::kCenterCrop;
  std::string background = "white";  // alpha and pad colour: name, #rrggbb or r,g,b
  int64_t max_pixels = 89478485;     // width*height limit read from the header (PIL's)
  // A tokenizer file (.model, CLIP's bpe_simple_vocab_16e6.txt.gz, tokenizer.json:
  // text/tokenizer.h); empty: train one on the captions; kNoTokenizer: none
  std::string tokenizer;
  int vocab_size = 8000;                                // when training a tokenizer
  int64_t tokenizer_sample = kDefaultTokenizerSample;   // captions a trained tokenizer sees
  int max_tokens = 77;                                  // per caption, bos/eos included
  int64_t max_caption_bytes = kDefaultMaxCaptionBytes;  // longer captions: caption_too_large
  TextOptions text;   // --lowercase, --normalize: before tokenizing only
  FieldNames fields;  // --image-field, --caption-field (ingest.h)
  // --keep-fields: manifest fields stored per sample (metadata/<name>); they are also the
  // first entries of fields.extra, so RawSample::fields starts with their values.
  std::vector<std::string> keep_fields;
  FilterOptions filters;                  // --min-size ... --dedup (curate/filters.h)
  int64_t shard_size = int64_t{1} << 30;  // bytes of a shard before it closes
  int64_t samples_per_shard = 0;          // 0: no limit
  // --codec raw's chunks: uncompressed by default: zstd gains about 10% on decoded
  // pixels, and a load-time crop of an uncompressed chunk reads only the rows and columns it
  // covers, straight from the mapping, where a zstd chunk must be decompressed whole first
  // (FORMAT.md, "Uncompressed chunks (the default) and the Zstandard filter").
  format::Codec compression = format::Codec::kNone;
  // Whether --compression or --compression-level was given; if not, --append takes OUT's.
  bool compression_given = false;
  // zstd level -1 (--fast=1): decoded pixels compress little at any level; -1 is about 5%
  // larger than level 1, compresses twice and decompresses 2.7 times as fast (FORMAT.md).
  int compression_level = kDefaultZstdLevel;
  // --codec jpeg (format 2): each image stored as a JPEG of --quality (compression none);
  // --max-size: the keep-ratio modes' bound, pixels.
  format::ImageCodec image_codec = format::ImageCodec::kRaw;
  int jpeg_quality = format::kDefaultJpegQuality;
  int max_size = 0;
  int threads = 0;  // 0: all cores
  bool quiet = false;
};

}  // namespace mm::pack

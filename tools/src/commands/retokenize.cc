// retokenize.cc: `mmpack retokenize SET --tokenizer FILE -o OUT` (commands.h).
//
//   OpenSource     SET's index (strict decoder) and its shards opened by the reader, which
//                  checks every shard's size and XXH3-64 before anything is read
//   ReadShard      one shard's tables through HDF5, and each sample's stored image as its
//                  bytes on disk: the compressed chunk (H5Dread_chunk) or the JPEG
//   Tokenize       each caption as `mmpack build` would (--lowercase, --normalize, the new
//                  tokenizer, --max-tokens)
//   write          the samples in SET's order through the build's ShardWriter, with SET's image
//                  options, shard size and kept fields, so OUT's shards are what `mmpack build`
//                  with the new tokenizer writes for the same samples (new token tables; image
//                  bytes as SET stored them, never decoded)
//   finish         the tokenizer file, report.json (SET's, with the new token counts), then
//                  index.json last; the staging folder published as OUT
//
// Shards hold images and token tables in one HDF5 file, so a shard cannot be shared with SET
// (a hard link would change SET's tables too): its image bytes are copied as they are.
#include <hdf5.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "commands/commands.h"
#include "set/output_dir.h"
#include "set/set_publish.h"
#include "mm/format.h"
#include "mm/internal/checksum.h"
#include "mm/internal/file.h"
#include "mm/internal/index_json.h"
#include "mm/reader.h"
#include "mm/sample_text.h"
#include "shard/h5_util.h"
#include "shard/shard_writer.h"
#include "text/tokenizer.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;
using mm::reader::internal::IndexDocument;

// What the tokenizer made of the set's captions (report.json).
struct TokenCounts {
  int64_t captions = 0, tokens = 0, unk = 0, truncated = 0;
};

// The tables of one shard that the writer needs besides text (read through HDF5).
struct ShardTables {
  std::vector<std::string> keys;
  std::vector<int32_t> original_size;  // [N, 2]
  std::vector<int32_t> valid_box;      // [N, 4]
  std::vector<int64_t> image_offsets;  // codec jpeg: [N + 1]
  std::vector<int32_t> image_size;     // codec jpeg: [N, 2]
};

Result<ShardTables> ReadTables(hid_t file, size_t n, bool jpeg) {
  ShardTables t;
  MM_ASSIGN_OR_RETURN(t.keys, h5::ReadFixedStrings(file, format::kKeys, n));
  MM_ASSIGN_OR_RETURN(t.original_size, h5::ReadNumeric<int32_t>(file, format::kOriginalSize,
                                                                H5T_NATIVE_INT32, 2 * n));
  MM_ASSIGN_OR_RETURN(t.valid_box,
                      h5::ReadNumeric<int32_t>(file, format::kValidBox, H5T_NATIVE_INT32, 4 * n));
  if (jpeg) {
    MM_ASSIGN_OR_RETURN(t.image_offsets, h5::ReadNumeric<int64_t>(file, format::kImageOffsets,
                                                                  H5T_NATIVE_INT64, n + 1));
    MM_ASSIGN_OR_RETURN(
        t.image_size, h5::ReadNumeric<int32_t>(file, format::kImageSize, H5T_NATIVE_INT32, 2 * n));
  }
  return t;
}

// Sample `s`'s stored image bytes: its chunk of `images` as stored (compressed), or its slice
// of `image_bytes`.
Status ReadStoredImage(hid_t images, bool jpeg, const ShardTables& t, int64_t s,
                       std::vector<uint8_t>* out) {
  if (jpeg) {
    const auto begin = static_cast<hsize_t>(t.image_offsets[s]);
    hsize_t count = static_cast<hsize_t>(t.image_offsets[s + 1]) - begin;
    out->resize(count);
    if (count == 0) return Status::OK();
    h5::Dataspace file_space(H5Dget_space(images));
    h5::Dataspace mem_space(H5Screate_simple(1, &count, nullptr));
    MM_RETURN_NOT_OK(h5::Check(
        H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &begin, nullptr, &count, nullptr),
        "selecting a JPEG", StatusCode::kCorruption));
    return h5::Check(H5Dread(images, H5T_NATIVE_UINT8, mem_space.get(), file_space.get(),
                             H5P_DEFAULT, out->data()),
                     "reading a JPEG", StatusCode::kCorruption);
  }
  hsize_t offset[4] = {static_cast<hsize_t>(s), 0, 0, 0};
  hsize_t stored = 0;
  if (H5Dget_chunk_storage_size(images, offset, &stored) < 0 || stored == 0) {
    return h5::ErrorFromStack(StatusCode::kCorruption, "image chunk missing");
  }
  out->resize(stored);
  uint32_t filter_mask = 0;
  return h5::Check(H5Dread_chunk(images, H5P_DEFAULT, offset, &filter_mask, out->data()),
                   "reading an image chunk", StatusCode::kCorruption);
}

// The token ids of `captions`, as `mmpack build` makes them.
Result<std::vector<std::vector<int32_t>>> Tokenize(const Tokenizer& tok,
                                                   const std::vector<std::string>& captions,
                                                   const RetokenizeOptions& o,
                                                   TokenCounts* counts) {
  std::vector<std::vector<int32_t>> rows;
  for (const std::string& c : captions) {
    MM_ASSIGN_OR_RETURN(std::string text, NormalizeForTokenizer(c, o.text));
    MM_ASSIGN_OR_RETURN(TokenizedCaption t, tok.Encode(text, o.max_tokens));
    ++counts->captions;
    counts->tokens += static_cast<int64_t>(t.ids.size());
    counts->unk += t.unk;
    counts->truncated += t.truncated ? 1 : 0;
    rows.push_back(std::move(t.ids));
  }
  return rows;
}

WriterOptions WriterOptionsOf(const IndexDocument& index, const std::string& staging,
                              const std::string& tokenizer_sha256) {
  const mm::reader::SetInfo& info = index.info;
  WriterOptions w;
  w.output_dir = staging;
  w.image_width = info.image_width;
  w.image_height = info.image_height;
  w.resize_mode = info.resize_mode.value_or(w.resize_mode);
  w.compression = info.compression;
  w.compression_level = info.compression_level;
  w.image_codec = info.image_codec;
  w.jpeg_quality = info.jpeg_quality;
  w.max_size = info.max_size;
  const auto& b = index.build_options;
  if (b.contains("shard_size") && b["shard_size"].is_number_integer()) {
    w.shard_size = b["shard_size"].get<int64_t>();
  }
  if (b.contains("samples_per_shard") && b["samples_per_shard"].is_number_integer()) {
    w.samples_per_shard = b["samples_per_shard"].get<int64_t>();
  }
  w.tokenizer_sha256 = tokenizer_sha256;
  w.metadata_fields = info.metadata_fields;
  w.check_unique_keys = false;  // SET's keys are unique (verified sets are)
  return w;
}

// Every sample of shard `k`, in order, into `writer`.
Status CopyShard(const mm::reader::ShardSet& set, const mm::reader::SampleText& text,
                 const Tokenizer& tok, const RetokenizeOptions& o, size_t k, int64_t first,
                 ShardWriter* writer, TokenCounts* counts) {
  const mm::reader::ShardEntry& entry = set.info().shards[k];
  const std::string path = (fs::path(set.info().root) / entry.file).string();
  const bool jpeg = set.info().image_codec == format::ImageCodec::kJpeg;
  MM_ASSIGN_OR_RETURN(h5::File file,
                      h5::Own<h5::File>(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), path,
                                        StatusCode::kCorruption));
  const auto n = static_cast<size_t>(entry.samples);
  MM_ASSIGN_OR_RETURN(ShardTables t, ReadTables(file.get(), n, jpeg));
  MM_ASSIGN_OR_RETURN(h5::Dataset images,
                      h5::OpenDataset(file.get(), jpeg ? format::kImageBytes : format::kImages));
  for (size_t s = 0; s < n; ++s) {
    const int64_t i = first + static_cast<int64_t>(s);
    EncodedSample e;
    e.key = t.keys[s];
    MM_ASSIGN_OR_RETURN(e.source, text.Source(i));
    MM_RETURN_NOT_OK(
        ReadStoredImage(images.get(), jpeg, t, static_cast<int64_t>(s), &e.image_chunk));
    if (jpeg) {
      e.stored_width = t.image_size[2 * s];
      e.stored_height = t.image_size[2 * s + 1];
    }
    e.original_width = t.original_size[2 * s];
    e.original_height = t.original_size[2 * s + 1];
    for (int v = 0; v < 4; ++v) e.valid_box[v] = t.valid_box[4 * s + v];
    MM_ASSIGN_OR_RETURN(e.captions, text.Captions(i));
    MM_ASSIGN_OR_RETURN(e.tokens, Tokenize(tok, e.captions, o, counts));
    if (!set.info().metadata_fields.empty()) {
      MM_ASSIGN_OR_RETURN(e.metadata, text.Metadata(i));
    }
    Status added = writer->Add(std::move(e));
    if (!added.ok()) return added.WithContext(entry.file + " sample " + std::to_string(s));
  }
  return Status::OK();
}

// SET's report.json with the new token counts (the drops it lists are SET's build's, still
// true of OUT); a minimal one when SET has none.
std::string Report(const fs::path& set_dir, const RetokenizeOptions& o, const TokenCounts& c,
                   int64_t samples) {
  nlohmann::ordered_json report = nlohmann::ordered_json::object();
  std::string text;
  if (ReadRegularFile((set_dir / std::string(format::kReportFile)).string(), &text).ok()) {
    auto parsed = nlohmann::ordered_json::parse(text, nullptr, false);
    if (parsed.is_object()) report = std::move(parsed);
  }
  report["samples_written"] = samples;
  report["truncated_captions"] = c.truncated;
  if (report.contains("stats") && report["stats"].is_object()) {
    report["stats"]["tokens"] = c.tokens;
    report["stats"]["unk_tokens"] = c.unk;
    report["stats"]["unk_rate"] = c.tokens > 0 ? static_cast<double>(c.unk) / c.tokens : 0.0;
    report["stats"].erase("caption_tokens");  // SET's histogram: no longer true
  }
  report["retokenized"] = {{"from", set_dir.string()}, {"tokenizer", o.tokenizer}};
  return report.dump(2) + "\n";
}

}  // namespace

Status RunRetokenize(const RetokenizeOptions& o) {
  MM_ASSIGN_OR_RETURN(std::string index_text, mm::reader::internal::ReadIndexText(o.set));
  MM_ASSIGN_OR_RETURN(IndexDocument index, mm::reader::internal::DecodeIndex(index_text, o.set));
  MM_ASSIGN_OR_RETURN(auto set, mm::reader::ShardSet::Open(o.set));
  if (set->remote()) return Status::InvalidArgument("retokenize reads a local set");
  MM_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok, Tokenizer::FromFile(o.tokenizer));
  const fs::path out = NormalOutput(o.output);
  const fs::path set_dir = fs::weakly_canonical(o.set);
  if (out == set_dir) return Status::InvalidArgument("-o must not be SET itself");
  std::error_code ec;
  if (fs::exists(fs::symlink_status(out, ec))) {
    if (!o.overwrite) {
      return Status::AlreadyExists("output '" + out.string() +
                                   "' exists; pass --overwrite to replace it");
    }
    MM_RETURN_NOT_OK(CheckReplaceable(out));
  }
  MM_ASSIGN_OR_RETURN(fs::path staging, MakeStaging(out));
  StagingGuard guard(staging);
  MM_RETURN_NOT_OK(h5::RegisterZstdFilter());
  const std::string sha = Sha256Hex(tok->model_bytes());
  MM_ASSIGN_OR_RETURN(auto writer,
                      ShardWriter::Create(WriterOptionsOf(index, staging.string(), sha)));
  mm::reader::SampleText text(set);
  TokenCounts counts;
  int64_t first = 0;
  for (size_t k = 0; k < set->num_shards(); ++k) {
    MM_RETURN_NOT_OK(CopyShard(*set, text, *tok, o, k, first, writer.get(), &counts));
    first += set->info().shards[k].samples;
  }
  MM_ASSIGN_OR_RETURN(std::vector<mm::reader::ShardEntry> shards, writer->Finish());

  MM_RETURN_NOT_OK(WriteText(staging / tok->file_name(), tok->model_bytes()));
  MM_RETURN_NOT_OK(
      WriteText(staging / std::string(format::kReportFile), Report(set_dir, o, counts, first)));
  IndexDocument doc = index;
  mm::reader::SetInfo& info = doc.info;
  info.shards = shards;
  info.has_tokenizer = true;
  info.vocab_size = tok->vocab_size();
  info.pad_id = tok->pad_id();
  info.unk_id = tok->unk_id();
  info.bos_id = tok->bos_id();
  info.eos_id = tok->eos_id();
  info.max_tokens = o.max_tokens;
  info.tokenizer_sha256 = sha;
  info.unk_rate = counts.tokens > 0 ? static_cast<double>(counts.unk) / counts.tokens : 0.0;
  info.text_lowercase = o.text.lowercase;
  info.text_normalize = std::string(ToString(o.text.normalize));
  doc.tokenizer_kind = tok->kind();
  doc.tokenizer_file = tok->file_name();
  doc.tokenizer_trained = false;
  doc.created_by = "mmpack " + std::string(mm::kVersion);
  doc.build_options["retokenized_from"] = set_dir.string();
  MM_RETURN_NOT_OK(
      WriteText(staging / std::string(format::kIndexFile), mm::reader::internal::EncodeIndex(doc)));
  MM_RETURN_NOT_OK(Publish(staging, out));
  guard.Disarm();
  if (!o.quiet) {
    std::fprintf(stderr,
                 "mmpack retokenize: %lld samples, %lld captions, %lld tokens (%lld captions "
                 "cut to --max-tokens %d) -> %s\n",
                 static_cast<long long>(first), static_cast<long long>(counts.captions),
                 static_cast<long long>(counts.tokens), static_cast<long long>(counts.truncated),
                 o.max_tokens, out.string().c_str());
  }
  return Status::OK();
}

}  // namespace mm::pack

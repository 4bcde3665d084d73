// index_json.cc: see mm/internal/index_json.h. Decoding runs as named stages, one per object
// of index.json (format, image, compression, tokenizer, shards, totals, the optional rest).
#include "mm/internal/index_json.h"

#include <limits>
#include <optional>
#include <utility>

#include "mm/internal/file.h"

namespace mm::reader::internal {
namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

Status Bad(const std::string& what) { return Status::Corruption("index.json: " + what); }

// Fetches obj[key] as an integer in [lo, hi].
Status GetInt(const json& obj, const char* key, int64_t lo, int64_t hi, int64_t* out,
              const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end()) return Bad(where + "missing \"" + key + "\"");
  if (!it->is_number_integer()) return Bad(where + "\"" + key + "\" is not an integer");
  int64_t v = it->is_number_unsigned()
                  ? (it->get<uint64_t>() > static_cast<uint64_t>(hi) ? hi + 1 : it->get<int64_t>())
                  : it->get<int64_t>();
  if (v < lo || v > hi) {
    return Bad(where + "\"" + key + "\" = " + it->dump() + " outside [" + std::to_string(lo) +
               ", " + std::to_string(hi) + "]");
  }
  *out = v;
  return Status::OK();
}

// GetInt into an int.
Status GetInt32(const json& obj, const char* key, int64_t lo, int64_t hi, int* out,
                const std::string& where) {
  int64_t v = 0;
  MM_RETURN_NOT_OK(GetInt(obj, key, lo, hi, &v, where));
  *out = static_cast<int>(v);
  return Status::OK();
}

Status GetString(const json& obj, const char* key, std::string* out, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end()) return Bad(where + "missing \"" + key + "\"");
  if (!it->is_string()) return Bad(where + "\"" + key + "\" is not a string");
  *out = it->get<std::string>();
  return Status::OK();
}

Result<const json*> GetObject(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_object()) {
    return Bad(std::string("missing object \"") + key + "\"");
  }
  return &*it;
}

// Optional fields: taken when present with the right type, else left as they are.
void OptString(const json& obj, const char* key, std::string* out) {
  auto it = obj.find(key);
  if (it != obj.end() && it->is_string()) *out = it->get<std::string>();
}
void OptBool(const json& obj, const char* key, bool* out) {
  auto it = obj.find(key);
  if (it != obj.end() && it->is_boolean()) *out = it->get<bool>();
}
void OptInt(const json& obj, const char* key, int64_t* out) {
  auto it = obj.find(key);
  if (it != obj.end() && it->is_number_integer()) *out = it->get<int64_t>();
}

constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxCount = std::numeric_limits<int64_t>::max() / 16;

Status Unreadable(const std::string& version) {
  return Status::Unsupported("index.json: format_version " + version +
                             " is not readable; this reader reads versions " +
                             std::to_string(mm::format::kMinReadableVersion) + ".." +
                             std::to_string(mm::format::kFormatVersion));
}

Status DecodeFormat(const json& doc, SetInfo* info) {
  std::string format;
  MM_RETURN_NOT_OK(GetString(doc, "format", &format, ""));
  if (format != mm::format::kFormatName) {
    return Status::Unsupported("index.json: format \"" + format + "\" is not \"" +
                               std::string(mm::format::kFormatName) + "\"");
  }
  auto ver = doc.find("format_version");
  if (ver == doc.end() || !ver->is_number_integer()) {
    return Bad("missing integer \"format_version\"");
  }
  if (ver->is_number_unsigned() && ver->get<uint64_t>() > kMaxInt) return Unreadable(ver->dump());
  const int64_t version = ver->get<int64_t>();
  if (version < mm::format::kMinReadableVersion || version > mm::format::kFormatVersion) {
    return Unreadable(std::to_string(version));
  }
  info->format_version = static_cast<int>(version);
  return Status::OK();
}

Status DecodeImage(const json& doc, IndexDocument* out) {
  MM_ASSIGN_OR_RETURN(const json* image, GetObject(doc, "image"));
  MM_RETURN_NOT_OK(GetInt32(*image, "height", 1, 1 << 15, &out->info.image_height, "image: "));
  MM_RETURN_NOT_OK(GetInt32(*image, "width", 1, 1 << 15, &out->info.image_width, "image: "));
  MM_RETURN_NOT_OK(GetInt32(*image, "channels", 3, 3, &out->info.channels, "image: "));
  SetInfo& info = out->info;
  std::string mode;  // optional: a format 1 reader never needed it (CheckSetRules)
  OptString(*image, "resize_mode", &mode);
  info.resize_mode = mm::format::ParseResizeMode(mode);
  out->other_resize_mode = info.resize_mode ? std::string() : mode;
  OptString(*image, "background", &out->background);
  // Format 2: how images are stored (absent: raw), and the keep-ratio bound.
  info.image_codec = mm::format::ImageCodec::kRaw;
  if (image->contains("codec")) {
    std::string codec;
    MM_RETURN_NOT_OK(GetString(*image, "codec", &codec, "image: "));
    const std::optional<mm::format::ImageCodec> parsed = mm::format::ParseImageCodec(codec);
    if (!parsed) {
      return Status::Unsupported("index.json: image codec \"" + codec +
                                 "\" (this reader reads raw and jpeg)");
    }
    info.image_codec = *parsed;
  }
  if (info.image_codec == mm::format::ImageCodec::kJpeg) {
    MM_RETURN_NOT_OK(GetInt32(*image, "quality", 1, 100, &info.jpeg_quality, "image: "));
  }
  if (image->contains("max_size")) {
    MM_RETURN_NOT_OK(GetInt32(*image, "max_size", 1, 1 << 15, &info.max_size, "image: "));
  }
  return Status::OK();
}

Status DecodeCompression(const json& doc, IndexDocument* out) {
  MM_ASSIGN_OR_RETURN(const json* comp, GetObject(doc, "compression"));
  SetInfo& info = out->info;
  std::string codec;
  MM_RETURN_NOT_OK(GetString(*comp, "codec", &codec, "compression: "));
  const std::optional<mm::format::Codec> parsed = mm::format::ParseCodec(codec);
  if (!parsed) {
    return Status::Unsupported("index.json: compression codec \"" + codec +
                               "\" (this reader reads zstd and none)");
  }
  info.compression = *parsed;
  info.compression_level = 0;
  if (comp->contains("level")) {
    MM_RETURN_NOT_OK(
        GetInt32(*comp, "level", -(1 << 17), 1 << 10, &info.compression_level, "compression: "));
  }
  int64_t filter_id = -1;
  OptInt(*comp, "hdf5_filter_id", &filter_id);
  out->hdf5_filter_id = static_cast<int>(filter_id);
  return Status::OK();
}

Status DecodeTokenizer(const json& doc, IndexDocument* out) {
  SetInfo& info = out->info;
  auto it = doc.find("tokenizer");
  if (it != doc.end() && it->is_null()) {  // `--tokenizer none`: text only
    info.has_tokenizer = false;
    info.vocab_size = info.pad_id = info.unk_id = info.max_tokens = 0;
    info.bos_id = info.eos_id = -1;
    return Status::OK();
  }
  MM_ASSIGN_OR_RETURN(const json* tok, GetObject(doc, "tokenizer"));
  // The ids the reader needs, in this order; -1 means "none" for the special pieces.
  const struct {
    const char* key;
    int64_t min;
    int* value;
  } kFields[] = {{"vocab_size", 0, &info.vocab_size}, {"pad_id", -1, &info.pad_id},
                 {"unk_id", -1, &info.unk_id},        {"bos_id", -1, &info.bos_id},
                 {"eos_id", -1, &info.eos_id},        {"max_tokens", 0, &info.max_tokens}};
  for (const auto& f : kFields) {
    MM_RETURN_NOT_OK(GetInt32(*tok, f.key, f.min, kMaxInt, f.value, "tokenizer: "));
  }
  OptString(*tok, "sha256", &info.tokenizer_sha256);
  OptString(*tok, "file", &out->tokenizer_file);
  std::string kind;
  OptString(*tok, "kind", &kind);
  if (!kind.empty()) {
    auto parsed = mm::format::ParseTokenizerKind(kind);
    if (!parsed) {
      return Status::Unsupported("index.json: tokenizer.kind \"" + kind +
                                 "\" (this reader knows sentencepiece, clip-bpe and "
                                 "tokenizer-json)");
    }
    out->tokenizer_kind = *parsed;
  }
  OptBool(*tok, "trained", &out->tokenizer_trained);
  auto unk_rate = tok->find("unk_rate");
  if (unk_rate != tok->end() && unk_rate->is_number()) info.unk_rate = unk_rate->get<double>();
  return Status::OK();
}

// "text" (optional; absent: no lowercasing, no normalisation).
Status DecodeText(const json& doc, SetInfo* info) {
  auto text = doc.find("text");
  if (text == doc.end()) return Status::OK();
  if (!text->is_object()) return Bad("\"text\" is not an object");
  OptBool(*text, "lowercase", &info->text_lowercase);
  OptString(*text, "normalize", &info->text_normalize);
  if (info->text_normalize != "none" && info->text_normalize != "nfkc") {
    return Status::Unsupported("index.json: text.normalize \"" + info->text_normalize +
                               "\" (this reader knows none and nfkc)");
  }
  return Status::OK();
}

// "metadata" (optional; absent: no kept fields): {"fields": [names]}. The names are checked
// with the set's other rules (CheckSetRules).
Status DecodeMetadata(const json& doc, SetInfo* info) {
  auto metadata = doc.find("metadata");
  if (metadata == doc.end()) return Status::OK();
  auto fields = metadata->is_object() ? metadata->find("fields") : metadata->end();
  if (!metadata->is_object() || fields == metadata->end() || !fields->is_array()) {
    return Bad("\"metadata\" is not an object with an array \"fields\"");
  }
  for (const json& f : *fields) {
    if (!f.is_string()) return Bad("metadata.fields holds a value that is not a string");
    info->metadata_fields.push_back(f.get<std::string>());
  }
  return Status::OK();
}

Status DecodeShardEntry(const json& s, const std::string& where, ShardEntry* e) {
  if (!s.is_object()) return Bad(where + "not an object");
  MM_RETURN_NOT_OK(GetString(s, "file", &e->file, where));
  if (e->file.empty() || e->file == "." || e->file == ".." ||
      e->file.find('/') != std::string::npos || e->file.find('\0') != std::string::npos) {
    return Bad(where + "file \"" + e->file + "\" is not a plain file name");
  }
  MM_RETURN_NOT_OK(GetInt(s, "samples", 0, kMaxCount, &e->samples, where));
  MM_RETURN_NOT_OK(GetInt(s, "captions", 0, kMaxCount, &e->captions, where));
  MM_RETURN_NOT_OK(GetInt(s, "tokens", 0, kMaxCount, &e->tokens, where));
  MM_RETURN_NOT_OK(GetInt(s, "bytes", 0, kMaxCount, &e->bytes, where));
  if (s.contains("xxh3_64")) MM_RETURN_NOT_OK(GetString(s, "xxh3_64", &e->xxh3_64, where));
  if (e->captions < e->samples) {
    return Bad(where + "captions (" + std::to_string(e->captions) + ") < samples (" +
               std::to_string(e->samples) + ")");
  }
  return Status::OK();
}

Status DecodeShards(const json& doc, SetInfo* info) {
  auto shards = doc.find("shards");
  if (shards == doc.end() || !shards->is_array()) return Bad("missing array \"shards\"");
  int64_t samples = 0, captions = 0;
  for (size_t i = 0; i < shards->size(); ++i) {
    ShardEntry e;
    MM_RETURN_NOT_OK(DecodeShardEntry((*shards)[i], "shards[" + std::to_string(i) + "]: ", &e));
    samples += e.samples;
    captions += e.captions;
    if (samples > kMaxCount || captions > kMaxCount) return Bad("counts overflow");
    info->shards.push_back(std::move(e));
  }
  info->num_samples = samples;
  info->num_captions = captions;
  return Status::OK();
}

// totals.<key>, where present, must equal `sum` ("... but <what> <sum>").
Status CheckTotal(const json& totals, const char* key, int64_t sum, const char* what,
                  int64_t* stored) {
  if (!totals.contains(key)) return Status::OK();
  MM_RETURN_NOT_OK(GetInt(totals, key, 0, kMaxCount, stored, "totals: "));
  if (*stored != sum) {
    return Bad(std::string("totals.") + key + " = " + std::to_string(*stored) + " but " + what +
               " " + std::to_string(sum));
  }
  return Status::OK();
}

Status DecodeTotals(const json& doc, IndexDocument* out) {
  Result<const json*> found = GetObject(doc, "totals");
  if (!found.ok()) return Status::OK();  // optional
  const json* totals = *found;
  const SetInfo& info = out->info;
  IndexDocument::Totals& t = out->totals;
  MM_RETURN_NOT_OK(CheckTotal(*totals, "samples", info.num_samples, "the shards hold", &t.samples));
  MM_RETURN_NOT_OK(
      CheckTotal(*totals, "captions", info.num_captions, "the shards hold", &t.captions));
  MM_RETURN_NOT_OK(CheckTotal(*totals, "shards", static_cast<int64_t>(info.shards.size()),
                              "\"shards\" lists", &t.shards));
  OptInt(*totals, "tokens", &t.tokens);
  OptInt(*totals, "bytes", &t.bytes);
  return Status::OK();
}

// created_by, build_options, dropped: for `mmpack info`, never needed to read the set.
void DecodeOptional(const json& doc, IndexDocument* out) {
  out->created_by.clear();
  OptString(doc, "created_by", &out->created_by);
  auto options = doc.find("build_options");
  if (options != doc.end() && options->is_object()) out->build_options = ojson(*options);
  auto dropped = doc.find("dropped");
  if (dropped == doc.end() || !dropped->is_object()) return;
  OptInt(*dropped, "total", &out->dropped_total);
  auto by_reason = dropped->find("by_reason");
  if (by_reason == dropped->end() || !by_reason->is_object()) return;
  for (const auto& [reason, count] : by_reason->items()) {
    if (count.is_number_integer()) out->dropped_by_reason[reason] = count.get<int64_t>();
  }
}

Status Decode(const json& doc, IndexDocument* out) {
  if (!doc.is_object()) return Bad("not a JSON object");
  MM_RETURN_NOT_OK(DecodeFormat(doc, &out->info));
  MM_RETURN_NOT_OK(DecodeImage(doc, out));
  MM_RETURN_NOT_OK(DecodeCompression(doc, out));
  MM_RETURN_NOT_OK(DecodeTokenizer(doc, out));
  MM_RETURN_NOT_OK(DecodeText(doc, &out->info));
  MM_RETURN_NOT_OK(DecodeMetadata(doc, &out->info));
  MM_RETURN_NOT_OK(DecodeShards(doc, &out->info));
  MM_RETURN_NOT_OK(DecodeTotals(doc, out));
  DecodeOptional(doc, out);
  return Status::OK();
}

ojson EncodeCompression(const SetInfo& info) {
  const std::string codec(mm::format::ToString(info.compression));
  if (info.compression == mm::format::Codec::kZstd) {
    return {{"codec", codec},
            {"level", info.compression_level},
            {"hdf5_filter_id", mm::format::kZstdFilterId}};
  }
  return {{"codec", codec}, {"level", 0}, {"hdf5_filter_id", 0}};
}

ojson EncodeTokenizer(const IndexDocument& doc) {
  const SetInfo& info = doc.info;
  ojson tok = {{"kind", std::string(mm::format::ToString(doc.tokenizer_kind))},
               {"file", doc.tokenizer_file.empty() ? std::string(mm::format::kTokenizerFile)
                                                   : doc.tokenizer_file},
               {"sha256", info.tokenizer_sha256},
               {"vocab_size", info.vocab_size},
               {"pad_id", info.pad_id},
               {"unk_id", info.unk_id},
               {"bos_id", info.bos_id},
               {"eos_id", info.eos_id},
               {"max_tokens", info.max_tokens},
               {"trained", doc.tokenizer_trained}};
  if (info.unk_rate >= 0) tok["unk_rate"] = info.unk_rate;
  return tok;
}

// "shards" and "totals", the totals summed over the shards.
void EncodeShards(const std::vector<ShardEntry>& shards, ojson* index) {
  int64_t samples = 0, captions = 0, tokens = 0, bytes = 0;
  ojson list = ojson::array();
  for (const auto& s : shards) {
    list.push_back({{"file", s.file},
                    {"samples", s.samples},
                    {"captions", s.captions},
                    {"tokens", s.tokens},
                    {"bytes", s.bytes},
                    {"xxh3_64", s.xxh3_64}});
    samples += s.samples;
    captions += s.captions;
    tokens += s.tokens;
    bytes += s.bytes;
  }
  (*index)["shards"] = std::move(list);
  (*index)["totals"] = {{"shards", static_cast<int64_t>(shards.size())},
                        {"samples", samples},
                        {"captions", captions},
                        {"tokens", tokens},
                        {"bytes", bytes}};
}

ojson EncodeDropped(const std::map<std::string, int64_t>& dropped_by_reason) {
  int64_t total = 0;
  ojson by_reason = ojson::object();
  for (const auto& [reason, n] : dropped_by_reason) {
    by_reason[reason] = n;
    total += n;
  }
  return {{"total", total}, {"by_reason", std::move(by_reason)}};
}

}  // namespace

std::string ResizeModeText(const IndexDocument& doc) {
  const std::optional<mm::format::ResizeMode>& mode = doc.info.resize_mode;
  return mode ? std::string(mm::format::ToString(*mode)) : doc.other_resize_mode;
}

std::string EncodeIndex(const IndexDocument& doc) {
  const SetInfo& info = doc.info;
  ojson index;
  index["format"] = std::string(mm::format::kFormatName);
  const bool jpeg = info.image_codec == mm::format::ImageCodec::kJpeg;
  index["format_version"] = mm::format::FormatVersionFor(info.image_codec);
  index["created_by"] = doc.created_by;
  index["image"] = {{"height", info.image_height},
                    {"width", info.image_width},
                    {"channels", 3},
                    {"resize_mode", ResizeModeText(doc)},
                    {"background", doc.background}};
  if (jpeg) {  // format 2 (absent from a raw set, which stays format 1)
    index["image"]["codec"] = std::string(mm::format::ToString(info.image_codec));
    index["image"]["quality"] = info.jpeg_quality;
    index["image"]["chroma_subsampling"] = std::string(mm::format::kJpegSubsampling);
  }
  if (info.max_size > 0) index["image"]["max_size"] = info.max_size;
  index["compression"] = EncodeCompression(info);
  index["tokenizer"] = info.has_tokenizer ? EncodeTokenizer(doc) : ojson(nullptr);
  index["text"] = {{"lowercase", info.text_lowercase}, {"normalize", info.text_normalize}};
  if (!info.metadata_fields.empty()) index["metadata"] = {{"fields", info.metadata_fields}};
  index["build_options"] = doc.build_options;
  EncodeShards(info.shards, &index);
  index["dropped"] = EncodeDropped(doc.dropped_by_reason);
  return index.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
}

Result<IndexDocument> DecodeIndex(std::string_view text, const std::string& root) {
  json doc = json::parse(text.begin(), text.end(), /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Bad("not valid JSON");
  IndexDocument out;
  out.info.root = root;
  try {
    MM_RETURN_NOT_OK(Decode(doc, &out));
  } catch (const json::exception& e) {  // a type nlohmann refuses to convert
    return Bad(e.what());
  }
  return out;
}

Result<SetInfo> ParseIndex(std::string_view text, const std::string& root) {
  MM_ASSIGN_OR_RETURN(IndexDocument doc, DecodeIndex(text, root));
  return std::move(doc.info);
}

Result<std::string> ReadIndexText(const std::string& dir) {
  const std::string path = dir + "/" + std::string(mm::format::kIndexFile);
  std::string text;
  Status st = ReadRegularFile(path, &text);
  if (st.IsNotFound()) return Status::NotFound(path + ": cannot open (not a shard set?)");
  MM_RETURN_NOT_OK(st);
  return text;
}

}  // namespace mm::reader::internal

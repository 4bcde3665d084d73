#include "index_json.h"

#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "mm/format.h"

namespace mm::reader::internal {
namespace {

using nlohmann::json;

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

Status GetString(const json& obj, const char* key, std::string* out, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end()) return Bad(where + "missing \"" + key + "\"");
  if (!it->is_string()) return Bad(where + "\"" + key + "\" is not a string");
  *out = it->get<std::string>();
  return Status::OK();
}

Status GetObject(const json& obj, const char* key, const json** out) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_object())
    return Bad(std::string("missing object \"") + key + "\"");
  *out = &*it;
  return Status::OK();
}

constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxCount = std::numeric_limits<int64_t>::max() / 16;

Status Parse(const json& doc, SetInfo* info) {
  if (!doc.is_object()) return Bad("not a JSON object");
  std::string format;
  MM_RETURN_NOT_OK(GetString(doc, "format", &format, ""));
  if (format != mm::format::kFormatName) {
    return Status::Unsupported("index.json: format \"" + format + "\" is not \"" +
                               std::string(mm::format::kFormatName) + "\"");
  }
  auto ver = doc.find("format_version");
  if (ver == doc.end() || !ver->is_number_integer())
    return Bad("missing integer \"format_version\"");
  if (ver->is_number_unsigned() ? ver->get<uint64_t>() > kMaxInt : false) {
    return Status::Unsupported("index.json: format_version " + ver->dump() +
                               " is not readable; this reader reads versions " +
                               std::to_string(mm::format::kMinReadableVersion) + ".." +
                               std::to_string(mm::format::kFormatVersion));
  }
  int64_t version = ver->get<int64_t>();
  if (version < mm::format::kMinReadableVersion || version > mm::format::kFormatVersion) {
    return Status::Unsupported("index.json: format_version " + std::to_string(version) +
                               " is not readable; this reader reads versions " +
                               std::to_string(mm::format::kMinReadableVersion) + ".." +
                               std::to_string(mm::format::kFormatVersion));
  }
  info->format_version = static_cast<int>(version);

  const json* image = nullptr;
  MM_RETURN_NOT_OK(GetObject(doc, "image", &image));
  int64_t h = 0, w = 0, c = 0;
  MM_RETURN_NOT_OK(GetInt(*image, "height", 1, 1 << 15, &h, "image: "));
  MM_RETURN_NOT_OK(GetInt(*image, "width", 1, 1 << 15, &w, "image: "));
  MM_RETURN_NOT_OK(GetInt(*image, "channels", 3, 3, &c, "image: "));
  info->image_height = static_cast<int>(h);
  info->image_width = static_cast<int>(w);
  info->channels = static_cast<int>(c);
  if (image->contains("resize_mode") && (*image)["resize_mode"].is_string()) {
    info->resize_mode = (*image)["resize_mode"].get<std::string>();
  }

  const json* comp = nullptr;
  MM_RETURN_NOT_OK(GetObject(doc, "compression", &comp));
  MM_RETURN_NOT_OK(GetString(*comp, "codec", &info->compression, "compression: "));
  if (info->compression != "zstd" && info->compression != "none") {
    return Status::Unsupported("index.json: compression codec \"" + info->compression +
                               "\" (this reader reads zstd and none)");
  }
  int64_t level = 0;
  if (comp->contains("level")) {
    MM_RETURN_NOT_OK(GetInt(*comp, "level", -(1 << 17), 1 << 10, &level, "compression: "));
  }
  info->compression_level = static_cast<int>(level);

  const json* tok = nullptr;
  MM_RETURN_NOT_OK(GetObject(doc, "tokenizer", &tok));
  int64_t v = 0;
  MM_RETURN_NOT_OK(GetInt(*tok, "vocab_size", 0, kMaxInt, &v, "tokenizer: "));
  info->vocab_size = static_cast<int>(v);
  MM_RETURN_NOT_OK(GetInt(*tok, "pad_id", -1, kMaxInt, &v, "tokenizer: "));
  info->pad_id = static_cast<int>(v);
  MM_RETURN_NOT_OK(GetInt(*tok, "unk_id", -1, kMaxInt, &v, "tokenizer: "));
  info->unk_id = static_cast<int>(v);
  MM_RETURN_NOT_OK(GetInt(*tok, "bos_id", -1, kMaxInt, &v, "tokenizer: "));
  info->bos_id = static_cast<int>(v);
  MM_RETURN_NOT_OK(GetInt(*tok, "eos_id", -1, kMaxInt, &v, "tokenizer: "));
  info->eos_id = static_cast<int>(v);
  MM_RETURN_NOT_OK(GetInt(*tok, "max_tokens", 0, kMaxInt, &v, "tokenizer: "));
  info->max_tokens = static_cast<int>(v);
  if (tok->contains("sha256") && (*tok)["sha256"].is_string()) {
    info->tokenizer_sha256 = (*tok)["sha256"].get<std::string>();
  }

  auto shards = doc.find("shards");
  if (shards == doc.end() || !shards->is_array()) return Bad("missing array \"shards\"");
  int64_t samples = 0, captions = 0;
  for (size_t i = 0; i < shards->size(); ++i) {
    const json& s = (*shards)[i];
    std::string where = "shards[" + std::to_string(i) + "]: ";
    if (!s.is_object()) return Bad(where + "not an object");
    ShardEntry e;
    MM_RETURN_NOT_OK(GetString(s, "file", &e.file, where));
    if (e.file.empty() || e.file == "." || e.file == ".." ||
        e.file.find('/') != std::string::npos || e.file.find('\0') != std::string::npos) {
      return Bad(where + "file \"" + e.file + "\" is not a plain file name");
    }
    MM_RETURN_NOT_OK(GetInt(s, "samples", 0, kMaxCount, &e.samples, where));
    MM_RETURN_NOT_OK(GetInt(s, "captions", 0, kMaxCount, &e.captions, where));
    MM_RETURN_NOT_OK(GetInt(s, "tokens", 0, kMaxCount, &e.tokens, where));
    MM_RETURN_NOT_OK(GetInt(s, "bytes", 0, kMaxCount, &e.bytes, where));
    if (s.contains("xxh3_64")) MM_RETURN_NOT_OK(GetString(s, "xxh3_64", &e.xxh3_64, where));
    if (e.captions < e.samples) {
      return Bad(where + "captions (" + std::to_string(e.captions) + ") < samples (" +
                 std::to_string(e.samples) + ")");
    }
    samples += e.samples;
    captions += e.captions;
    if (samples > kMaxCount || captions > kMaxCount) return Bad("counts overflow");
    info->shards.push_back(std::move(e));
  }
  info->num_samples = samples;
  info->num_captions = captions;

  const json* totals = nullptr;
  if (GetObject(doc, "totals", &totals).ok()) {
    int64_t t = 0;
    if (totals->contains("samples")) {
      MM_RETURN_NOT_OK(GetInt(*totals, "samples", 0, kMaxCount, &t, "totals: "));
      if (t != samples) {
        return Bad("totals.samples = " + std::to_string(t) + " but the shards hold " +
                   std::to_string(samples));
      }
    }
    if (totals->contains("captions")) {
      MM_RETURN_NOT_OK(GetInt(*totals, "captions", 0, kMaxCount, &t, "totals: "));
      if (t != captions) {
        return Bad("totals.captions = " + std::to_string(t) + " but the shards hold " +
                   std::to_string(captions));
      }
    }
    if (totals->contains("shards")) {
      MM_RETURN_NOT_OK(GetInt(*totals, "shards", 0, kMaxCount, &t, "totals: "));
      if (t != static_cast<int64_t>(info->shards.size())) {
        return Bad("totals.shards = " + std::to_string(t) + " but \"shards\" lists " +
                   std::to_string(info->shards.size()));
      }
    }
  }
  return Status::OK();
}

}  // namespace

Result<SetInfo> ParseIndex(std::string_view text, const std::string& root) {
  json doc = json::parse(text.begin(), text.end(), /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Bad("not valid JSON");
  SetInfo info;
  info.root = root;
  try {
    MM_RETURN_NOT_OK(Parse(doc, &info));
  } catch (const json::exception& e) {  // a type nlohmann refuses to convert
    return Bad(e.what());
  }
  return info;
}

}  // namespace mm::reader::internal

// coco.cc: the COCO captions JSON, images[] and annotations[] (ingest.h, "coco").
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ingest/common.h"
#include "ingest/formats.h"
#include "ingest/keys.h"
#include "ingest/lenient_json.h"
#include "mm/internal/file.h"

namespace mm::pack {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// The images of a COCO file, as samples: which sample each image id is (two ids with the same
// file_name are the same image: one sample holding the captions of both, in annotation order,
// not two samples with the same key, which `mmpack verify` would reject).
struct CocoImages {
  std::unordered_map<std::string, size_t> by_id;   // id as JSON text -> sample
  std::unordered_set<std::string> unstorable_ids;  // images reported as invalid_utf8
};

// The whole file, parsed (lenient_json.h keeps a bad string to its own caption).
Result<json> ParseCoco(const fs::path& file, NeutralJson* neutral) {
  std::string text;
  MM_RETURN_NOT_OK(ReadRegularFile(file.string(), &text));
  *neutral = NeutralizeJson(text);
  std::string().swap(text);
  json doc;
  try {
    doc = json::parse(neutral->text);
  } catch (const json::exception& e) {
    return Status::InvalidArgument(file.string() + ": not valid JSON: " + e.what());
  }
  std::string().swap(neutral->text);
  if (!doc.is_object()) return Status::InvalidArgument(file.string() + ": not a JSON object");
  auto images = doc.find("images");
  auto annotations = doc.find("annotations");
  if (images == doc.end() || !images->is_array() || annotations == doc.end() ||
      !annotations->is_array()) {
    return Status::InvalidArgument(file.string() +
                                   ": COCO captions JSON needs arrays 'images' and 'annotations'");
  }
  return doc;
}

// images[]: one sample per distinct file_name, resolved against the JSON's folder, else its
// images/ subfolder.
CocoImages ReadImages(const json& images, const fs::path& file, const NeutralJson& neutral,
                      IngestResult* result) {
  CocoImages out;
  std::unordered_map<std::string, size_t> by_file;  // file_name -> sample
  const std::string where = file.filename().string();
  const fs::path base = file.parent_path();
  for (size_t i = 0; i < images.size(); ++i) {
    const json& im = images[i];
    std::string source = where + ":images[" + std::to_string(i) + "]";
    if (!im.is_object() || !im.contains("id") || !im.contains("file_name") ||
        !im["file_name"].is_string()) {
      result->issues.push_back({source, "", "invalid_manifest_line", "image without id/file_name"});
      continue;
    }
    std::string file_name = im["file_name"].get<std::string>();
    if (neutral.changed && file_name.find(neutral.mark) != std::string::npos) {
      result->issues.push_back({source, "", "invalid_utf8",
                                "file_name is not valid UTF-8 (an invalid byte or a lone "
                                "surrogate escape)"});
      out.unstorable_ids.insert(im["id"].dump());  // its annotations go with it, unreported
      continue;
    }
    std::string id = im["id"].dump();
    if (out.by_id.count(id) != 0) {
      result->issues.push_back({source, "", "duplicate_key", "image id " + id + " repeated"});
      continue;
    }
    auto [file_it, new_file] = by_file.emplace(file_name, result->samples.size());
    out.by_id.emplace(id, file_it->second);
    if (!new_file) continue;  // same file as an earlier id: that sample gets these captions
    RawSample s;
    s.source = std::move(file_name);
    s.path = Resolve(base, s.source);
    std::error_code ec;
    if (!fs::exists(s.path, ec)) {
      std::string alt = Resolve(base / "images", s.source);
      if (fs::exists(alt, ec)) s.path = alt;
    }
    result->samples.push_back(std::move(s));
  }
  return out;
}

// annotations[]: each caption to its image's sample, in annotation order.
void ReadAnnotations(const json& annotations, const std::string& where, const CocoImages& images,
                     const NeutralJson& neutral, IngestResult* result) {
  for (size_t i = 0; i < annotations.size(); ++i) {
    const json& an = annotations[i];
    std::string source = where + ":annotations[" + std::to_string(i) + "]";
    if (!an.is_object() || !an.contains("image_id") || !an.contains("caption") ||
        !an["caption"].is_string()) {
      result->issues.push_back(
          {source, "", "invalid_manifest_line", "annotation without image_id/caption"});
      continue;
    }
    auto it = images.by_id.find(an["image_id"].dump());
    if (it == images.by_id.end() && images.unstorable_ids.count(an["image_id"].dump()) != 0) {
      continue;
    }
    if (it == images.by_id.end()) {
      result->issues.push_back({source, "", "invalid_manifest_line",
                                "annotation for unknown image_id " + an["image_id"].dump()});
      continue;
    }
    std::string caption = an["caption"].get<std::string>();
    if (neutral.changed) RestoreInvalid(&caption, neutral.mark);
    result->samples[it->second].captions.push_back(std::move(caption));
  }
}

// Images that no annotation describes cannot be samples.
void DropUncaptioned(IngestResult* result) {
  std::vector<RawSample> kept;
  kept.reserve(result->samples.size());
  for (RawSample& s : result->samples) {
    if (s.captions.empty()) {
      result->issues.push_back({s.source, s.key, "missing_caption", "no annotation"});
    } else {
      kept.push_back(std::move(s));
    }
  }
  result->samples = std::move(kept);
}

}  // namespace

Result<IngestResult> IngestCoco(const fs::path& file) {
  NeutralJson neutral;
  MM_ASSIGN_OR_RETURN(json doc, ParseCoco(file, &neutral));
  IngestResult result;
  result.format = InputFormat::kCoco;
  const CocoImages images = ReadImages(doc["images"], file, neutral, &result);
  ReadAnnotations(doc["annotations"], file.filename().string(), images, neutral, &result);
  AssignKeys(&result.samples);
  DropUncaptioned(&result);
  return result;
}

}  // namespace mm::pack

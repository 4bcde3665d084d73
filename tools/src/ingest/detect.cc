// detect.cc: which input format a path holds (DetectInputFormat, ingest.h).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ingest/common.h"
#include "ingest/formats.h"
#include "text/ascii.h"

namespace mm::pack {

namespace fs = std::filesystem;
using json = nlohmann::json;

InputFormat ManifestFormatOfName(const std::string& name) {
  const std::string ext = AsciiLower(fs::path(name).extension().string());
  if (ext == ".jsonl" || ext == ".ndjson") return InputFormat::kJsonl;
  if (ext == ".csv") return InputFormat::kCsv;
  if (ext == ".tsv" || ext == ".tab") return InputFormat::kTsv;
  if (ext == ".json") return InputFormat::kCoco;
  return InputFormat::kAuto;
}

std::string ManifestInFolder(const fs::path& dir) {
  std::error_code ec;
  for (const char* name : {"metadata.jsonl", "metadata.csv"}) {  // a Hugging Face imagefolder
    if (fs::is_regular_file(dir / name, ec)) return (dir / name).string();
  }
  std::map<std::string, std::vector<fs::path>> by_ext;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::error_code entry_ec;
    if (!e.is_regular_file(entry_ec)) continue;
    std::string ext = AsciiLower(e.path().extension().string());
    if (ext == ".txt" || ext == ".tar" || (ext.size() > 1 && IsImageExtension(ext.substr(1)))) {
      return "";
    }
    by_ext[ext].push_back(e.path());
  }
  for (const char* ext : {".jsonl", ".csv", ".tsv", ".json"}) {
    auto it = by_ext.find(ext);
    if (it == by_ext.end()) continue;
    return it->second.size() == 1 ? it->second[0].string() : "";
  }
  return "";
}

InputFormat JsonManifestFormat(std::string head) {
  // A COCO file is one JSON object; a JSONL file named .json has one object a line (a first
  // JSONL line over 1 MiB reads as COCO: name it .jsonl).
  const size_t newline = head.find('\n');
  if (newline == std::string::npos && head.size() == (size_t{1} << 20)) return InputFormat::kCoco;
  head.resize(std::min(head.size(), newline));
  json line = json::parse(head, nullptr, false);
  if (!line.is_discarded() && line.is_object() &&
      (line.contains("image") || line.contains("image_path") || line.contains("file_name")) &&
      !line.contains("images")) {
    return InputFormat::kJsonl;
  }
  return InputFormat::kCoco;
}

Result<InputFormat> DetectInputFormat(const std::string& input) {
  std::error_code ec;
  fs::path p(input);
  if (!fs::exists(p, ec)) return Status::NotFound("no such file or directory: " + input);
  if (fs::is_directory(p, ec)) {
    std::string manifest = ManifestInFolder(p);
    if (!manifest.empty()) return DetectInputFormat(manifest);
    bool has_tar = false, has_image = false;
    for (const auto& e : fs::directory_iterator(p, ec)) {
      std::error_code entry_ec;
      if (!e.is_regular_file(entry_ec)) continue;
      std::string ext = AsciiLower(e.path().extension().string());
      if (ext == ".tar") has_tar = true;
      if (ext.size() > 1 && IsImageExtension(ext.substr(1))) has_image = true;
    }
    return has_tar && !has_image ? InputFormat::kWds : InputFormat::kFiles;
  }
  const InputFormat named = ManifestFormatOfName(input);
  if (named != InputFormat::kAuto && named != InputFormat::kCoco) return named;
  if (AsciiLower(p.extension().string()) == ".tar") return InputFormat::kWds;
  if (named == InputFormat::kCoco) {
    // Only the first MiB is read: a COCO file is often one line of a hundred MB.
    std::ifstream in(p, std::ios::binary);
    std::string first(size_t{1} << 20, '\0');
    in.read(first.data(), static_cast<std::streamsize>(first.size()));
    first.resize(static_cast<size_t>(in.gcount()));
    return JsonManifestFormat(std::move(first));
  }
  return Status::InvalidArgument("cannot tell the input format of " + input +
                                 " (expected a folder, .jsonl, .csv, .tsv, .json or .tar); "
                                 "pass --input-format");
}

}  // namespace mm::pack

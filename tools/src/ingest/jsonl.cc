// jsonl.cc: the JSONL manifest, one JSON object a line (ingest.h, "jsonl").
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>

#include "ingest/common.h"
#include "ingest/formats.h"
#include "ingest/keys.h"
#include "ingest/lenient_json.h"
#include "mm/internal/file.h"

namespace mm::pack {

namespace fs = std::filesystem;

namespace {

using json = nlohmann::json;

const json* FirstField(const json& obj, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    auto it = obj.find(n);
    if (it != obj.end() && !it->is_null()) return &*it;
  }
  return nullptr;
}

// One line's sample: its image path and caption, or the issue that keeps it out.
// False (and `issue` set) when the line is not a usable sample.
bool ParseLine(const std::string& line, const std::string& source, std::string* image_path,
               std::string* caption, IngestIssue* issue) {
  auto reject = [&](const char* reason, std::string detail) {
    *issue = {source, "", reason, std::move(detail)};
    return false;
  };
  NeutralJson neutral = NeutralizeJson(line);
  json obj;
  std::string parse_error;
  try {
    obj = json::parse(neutral.text);
  } catch (const json::exception& e) {
    parse_error = e.what();
  }
  if (!parse_error.empty() || !obj.is_object()) {
    return reject("invalid_manifest_line",
                  parse_error.empty() ? "not a JSON object" : "not a JSON object: " + parse_error);
  }
  const json* image = FirstField(obj, {"image", "image_path", "file_name"});
  const json* text = FirstField(obj, {"text", "caption"});
  if (image == nullptr || !image->is_string() || image->get_ref<const std::string&>().empty()) {
    return reject("invalid_manifest_line", "no string field image/image_path/file_name");
  }
  const std::string& path = image->get_ref<const std::string&>();
  if (text == nullptr || !text->is_string()) {
    return reject("invalid_manifest_line", "no string field text/caption for " + path);
  }
  *caption = text->get<std::string>();
  if (neutral.changed) RestoreInvalid(caption, neutral.mark);
  if (path.find('\0') != std::string::npos) {
    return reject("invalid_manifest_line", "image path holds a NUL");
  }
  if (neutral.changed && path.find(neutral.mark) != std::string::npos) {
    return reject("invalid_utf8",
                  "image path is not valid UTF-8 (an invalid byte or a lone surrogate escape)");
  }
  *image_path = path;
  return true;
}

}  // namespace

Result<IngestResult> IngestJsonl(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return ErrnoStatus(errno, "cannot open " + file.string());
  IngestResult result;
  result.format = InputFormat::kJsonl;
  Grouper grouper(file.parent_path());
  std::string line;
  int64_t line_no = 0;
  const std::string where = file.filename().string();
  while (std::getline(in, line)) {
    ++line_no;
    if (line_no == 1) StripBom(&line);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    std::string image, caption;
    IngestIssue issue;
    if (ParseLine(line, where + ":" + std::to_string(line_no), &image, &caption, &issue)) {
      grouper.Add(image, std::move(caption));
    } else {
      result.issues.push_back(std::move(issue));
    }
  }
  if (in.bad()) return Status::IOError("read error in " + file.string());
  result.samples = grouper.Take();
  return result;
}

}  // namespace mm::pack

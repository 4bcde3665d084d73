// jsonl.cc: the JSONL manifest, one JSON object a line (ingest.h, "jsonl").
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "ingest/common.h"
#include "ingest/fields.h"
#include "ingest/formats.h"
#include "ingest/image_url.h"
#include "ingest/keys.h"
#include "ingest/lenient_json.h"
#include "mm/internal/file.h"

namespace mm::pack {

namespace fs = std::filesystem;

namespace {

using json = nlohmann::json;

// One line: its image path, captions and kept fields.
struct Line {
  std::string image;
  std::vector<std::string> captions;
  std::vector<FieldValue> fields;
};

// One line's sample, or the issue that keeps it out: false (and `issue` set) when the line is
// not a usable sample.
bool ParseLine(const std::string& line, const std::string& source, const FieldPlan& plan,
               const std::string& base, Line* out, IngestIssue* issue) {
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
  const json* image = nullptr;
  for (const std::string& name : plan.image) {
    auto it = obj.find(name);
    if (it != obj.end() && !it->is_null()) {
      image = &*it;
      break;
    }
  }
  if (image == nullptr || !image->is_string() || image->get_ref<const std::string&>().empty()) {
    return reject("invalid_manifest_line", "no string field " + FieldPlan::List(plan.image));
  }
  const std::string& path = image->get_ref<const std::string&>();
  out->captions = JsonCaptions(obj, plan);
  if (out->captions.empty()) {
    return reject("invalid_manifest_line",
                  "no string field " + FieldPlan::List(plan.caption) + " for " + path);
  }
  if (neutral.changed) {
    for (std::string& c : out->captions) RestoreInvalid(&c, neutral.mark);
  }
  if (path.find('\0') != std::string::npos) {
    return reject("invalid_manifest_line", "image path holds a NUL");
  }
  if (neutral.changed && path.find(neutral.mark) != std::string::npos) {
    return reject("invalid_utf8",
                  "image path is not valid UTF-8 (an invalid byte or a lone surrogate escape)");
  }
  if (ResolvedImage r = ResolveImagePath(base, path); r.reason != nullptr) {
    return reject(r.reason, std::move(r.detail));
  }
  for (const std::string& name : plan.extra) {
    auto it = obj.find(name);
    out->fields.push_back(it == obj.end() ? FieldValue() : JsonField(*it));
    if (neutral.changed && out->fields.back().type == FieldValue::Type::kString) {
      RestoreInvalid(&out->fields.back().s, neutral.mark);
    }
  }
  out->image = path;
  return true;
}

}  // namespace

Result<IngestResult> IngestJsonl(const ManifestFile& manifest, const FieldNames& names,
                                 const fs::path& spill_dir) {
  const FieldPlan plan(names);
  MappedText mapped;
  MM_RETURN_NOT_OK(mapped.Open(manifest.display, manifest.fd.get()));
  const std::string_view text = mapped.text();
  IngestResult result;
  result.format = InputFormat::kJsonl;
  Grouper grouper(manifest.base, spill_dir, names.max_caption_bytes);
  std::string line;
  int64_t line_no = 0;
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find('\n', at), text.size());
    line.assign(text.substr(at, end - at));
    at = end + 1;
    mapped.DoneBefore(std::min(at, text.size()));
    ++line_no;
    if (line_no == 1) StripBom(&line);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    Line parsed;
    IngestIssue issue;
    if (ParseLine(line, manifest.name + ":" + std::to_string(line_no), plan, manifest.base, &parsed,
                  &issue)) {
      MM_RETURN_NOT_OK(
          grouper.Add(parsed.image, std::move(parsed.captions), std::move(parsed.fields)));
    } else {
      result.issues.push_back(std::move(issue));
    }
  }
  MM_ASSIGN_OR_RETURN(result.list, grouper.Take());
  return result;
}

}  // namespace mm::pack

// wds.cc: WebDataset tars, members grouped by key (ingest.h, "wds").
#include "ingest/wds.h"

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ingest/brace.h"
#include "ingest/common.h"
#include "ingest/fields.h"
#include "ingest/formats.h"
#include "ingest/keys.h"
#include "ingest/lenient_json.h"
#include "ingest/remote_file.h"
#include "text/ascii.h"

namespace mm::pack {

namespace fs = std::filesystem;

Result<TarArchive> OpenTar(const std::string& path) {
  if (IsRemoteUrl(path)) return OpenRemoteTar(path);  // range requests, one block in memory
  ArchiveReadPtr a(archive_read_new());
  if (!a) return Status::Internal("archive_read_new failed");
  archive_read_support_format_tar(a.get());
  archive_read_support_format_gnutar(a.get());
  archive_read_support_filter_all(a.get());  // .tar.gz etc. also work
  if (archive_read_open_filename(a.get(), path.c_str(), 1 << 16) != ARCHIVE_OK) {
    std::string msg = archive_error_string(a.get()) ? archive_error_string(a.get()) : "";
    if (!fs::exists(path)) return Status::NotFound("no such file: " + path);
    return Status::IOError("cannot open tar " + path + ": " + msg);
  }
  return TarArchive{nullptr, std::move(a)};
}

Status ReadMemberData(archive* a, std::string* bytes) {
  bytes->clear();
  const void* buf;
  size_t len;
  la_int64_t offset;
  for (;;) {
    int r = archive_read_data_block(a, &buf, &len, &offset);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN) {
      const char* msg = archive_error_string(a);
      return Status::IOError(std::string("tar read error: ") + (msg ? msg : "unknown"));
    }
    if (offset < 0 || static_cast<uint64_t>(offset) != bytes->size()) {
      return Status::Unsupported("sparse tar member (data resumes at byte " +
                                 std::to_string(offset) + " after a hole at byte " +
                                 std::to_string(bytes->size()) + "); not read");
    }
    bytes->append(static_cast<const char*>(buf), len);
  }
  return Status::OK();
}

namespace {

using json = nlohmann::json;

// What a member is to its WebDataset sample.
enum class MemberKind { kOther, kImage, kText, kJson };

// A member's place in a WebDataset sample: its key (the path up to the first dot of its base
// name) and its kind from the field's last part: an image (the extensions of
// IsImageExtension), text (a field ending in txt, caption or text: ".txt", ".caption",
// ".en.txt") or JSON (".json", img2dataset's per-sample metadata).
MemberKind ParseMemberName(const std::string& name, std::string* key) {
  const size_t slash = name.find_last_of('/');
  const size_t base_start = slash == std::string::npos ? 0 : slash + 1;
  const size_t dot = name.find('.', base_start);
  if (dot == std::string::npos || dot == base_start) return MemberKind::kOther;
  *key = name.substr(0, dot);
  // WebDataset field names: "jpg", "txt", also "caption", "0.txt", "en.caption", "json".
  const std::string ext = AsciiLower(name.substr(dot + 1));
  const std::string last = ext.substr(ext.find_last_of('.') + 1);
  if (IsImageExtension(last)) return MemberKind::kImage;
  if (last == "txt" || last == "caption" || last == "text") return MemberKind::kText;
  if (last == "json") return MemberKind::kJson;
  return MemberKind::kOther;
}

// The members of one tar grouped by key, in first-appearance order: one image member each,
// its caption members' text and, when `plan` reads fields, its .json member's text (image
// bytes are read later, by ImageReader).
class TarGroups {
 public:
  TarGroups(std::string tar_label, const FieldNames& names)
      : label_(std::move(tar_label)),
        plan_(names),
        json_captions_(!names.caption.empty()),
        reads_json_(json_captions_ || !names.extra.empty()) {}

  // Adds the current member (number `index`) of `a`. False when reading must stop here (the
  // archive is damaged); what was read before is kept.
  bool AddMember(archive* a, archive_entry* entry, int64_t index, IngestResult* result) {
    if (archive_entry_filetype(entry) != AE_IFREG) return true;
    const char* name_c = archive_entry_pathname(entry);
    if (name_c == nullptr) return true;
    const std::string name = name_c;
    std::string key;
    const MemberKind kind = ParseMemberName(name, &key);
    if (kind == MemberKind::kOther || (kind == MemberKind::kJson && !reads_json_) ||
        (kind == MemberKind::kText && json_captions_)) {
      return true;
    }
    auto [it, inserted] = groups_.try_emplace(key);
    if (inserted) order_.push_back(key);
    Group& g = it->second;
    if (kind == MemberKind::kImage) {
      if (g.image.empty()) {
        g.image = name;
        g.image_index = index;
      } else {
        result->issues.push_back({label_ + ":" + name, key, "duplicate_key",
                                  "another image member has the same key: " + g.image});
      }
      return true;
    }
    if (archive_entry_size_is_set(entry) != 0 && archive_entry_size(entry) > kMaxCaptionFileBytes) {
      result->issues.push_back({label_ + ":" + name, key, "file_too_large",
                                std::string(kind == MemberKind::kJson ? "JSON" : "caption") +
                                    " member of " + std::to_string(archive_entry_size(entry)) +
                                    " bytes, over the " + std::to_string(kMaxCaptionFileBytes) +
                                    " bytes read of one"});
      return true;  // its data is skipped by the next header read
    }
    std::string text;
    Status st = ReadMemberData(a, &text);
    if (!st.ok()) {
      result->issues.push_back({label_ + ":" + name, key, "unreadable", st.message()});
      return st.code() == StatusCode::kUnsupported;  // after a sparse member, the next is readable
    }
    if (kind == MemberKind::kJson) {
      if (g.json_member.empty()) {
        g.json_member = name;
        g.json_text = std::move(text);
      } else {
        result->issues.push_back({label_ + ":" + name, key, "duplicate_key",
                                  "another .json member has the same key: " + g.json_member});
      }
      return true;
    }
    StripBom(&text);
    StripOneNewline(&text);
    g.captions.push_back(std::move(text));
    return true;
  }

  // The groups as samples of `tar` (into `out`), or as issues (no image member, no caption,
  // a .json member that is not a JSON object). Errors: those of SampleList::Add.
  Status Emit(const fs::path& tar, SampleList* out, IngestResult* result) {
    for (const std::string& key : order_) {
      Group& g = groups_[key];
      if (g.image.empty()) {
        result->issues.push_back({label_ + ":" + key, key, "missing_file",
                                  "caption or .json member without an image member"});
        continue;
      }
      RawSample s;
      if (reads_json_ && !ReadJson(key, &g, &s, result)) continue;
      if (!json_captions_) s.captions = std::move(g.captions);
      if (s.captions.empty()) {
        result->issues.push_back(
            {label_ + ":" + g.image, key, "missing_caption",
             json_captions_
                 ? "no string field " + FieldPlan::List(plan_.caption) + " in " +
                       (g.json_member.empty() ? "a .json member (there is none)" : g.json_member)
                 : "no .txt/.caption member"});
        continue;
      }
      s.key = key;
      s.source = label_ + ":" + g.image;
      s.path = tar.string();
      s.tar_member = g.image;
      s.tar_member_index = g.image_index;
      MM_RETURN_NOT_OK(out->Add(s));
    }
    return Status::OK();
  }

 private:
  struct Group {
    std::string image;
    int64_t image_index = -1;
    std::vector<std::string> captions;
    std::string json_member, json_text;
  };

  // The fields (FieldNames::extra, missing without a .json member) and, with --caption-field,
  // the captions of `g`'s .json member into `s`. False (an issue added) when the member is not
  // a JSON object.
  bool ReadJson(const std::string& key, Group* g, RawSample* s, IngestResult* result) {
    json obj = json::object();
    NeutralJson neutral;
    if (!g->json_member.empty()) {
      neutral = NeutralizeJson(g->json_text);
      obj = json::parse(neutral.text, nullptr, /*allow_exceptions=*/false);
      if (obj.is_discarded() || !obj.is_object()) {
        result->issues.push_back({label_ + ":" + g->json_member, key, "invalid_manifest_line",
                                  "the .json member is not a JSON object"});
        return false;
      }
    }
    for (const std::string& name : plan_.extra) {
      auto it = obj.find(name);
      s->fields.push_back(it == obj.end() ? FieldValue() : JsonField(*it));
      if (neutral.changed && s->fields.back().type == FieldValue::Type::kString) {
        RestoreInvalid(&s->fields.back().s, neutral.mark);
      }
    }
    if (json_captions_) {
      s->captions = JsonCaptions(obj, plan_);
      if (neutral.changed) {
        for (std::string& c : s->captions) RestoreInvalid(&c, neutral.mark);
      }
    }
    return true;
  }

  std::string label_;
  FieldPlan plan_;
  bool json_captions_;  // --caption-field: captions from the .json member, not .txt members
  bool reads_json_;     // fields or captions come from .json members
  std::vector<std::string> order_;
  std::unordered_map<std::string, Group> groups_;
};

// Appends the samples of one tar to `out`, its issues to `result`. Memory: one tar's members
// (a WebDataset shard is a bounded size, whatever the dataset's).
Status IngestOneTar(const fs::path& tar, const std::string& tar_label, const FieldNames& names,
                    SampleList* out, IngestResult* result) {
  auto opened = OpenTar(tar.string());
  if (!opened.ok() && IsRemoteUrl(tar.string()) &&
      opened.status().code() == StatusCode::kIOError) {
    // A remote tar that stays unreadable after the retries (a server that dies or refuses) is
    // reported; the other tars are built. A server without range requests fails the build.
    result->issues.push_back({tar_label, "", "unreadable", opened.status().message()});
    return Status::OK();
  }
  MM_ASSIGN_OR_RETURN(TarArchive a, std::move(opened));
  TarGroups groups(tar_label, names);
  archive_entry* entry;
  for (int64_t index = 0;; ++index) {
    const int r = archive_read_next_header(a.get(), &entry);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN) {
      const char* msg = archive_error_string(a.get());
      result->issues.push_back(
          {tar_label, "", "unreadable", std::string("tar read error: ") + (msg ? msg : "unknown")});
      break;  // keep what was read before the damage
    }
    if (!groups.AddMember(a.get(), entry, index, result)) break;
  }
  return groups.Emit(tar, out, result);
}

// The tars of a URL or a brace list of URLs (remote_file.h): those that exist (HEAD), each
// missing one an issue. A URL is a tar, never a folder: object stores are not listed.
Result<std::vector<fs::path>> ListRemoteTars(const std::string& input, IngestResult* result) {
  std::vector<std::string> names{input};
  if (HasBraceGroup(input)) {
    MM_ASSIGN_OR_RETURN(names, ExpandBraces(input));
  }
  std::vector<fs::path> tars;
  for (const std::string& url : names) {
    MM_ASSIGN_OR_RETURN(RemoteFileStat stat, StatRemoteFile(url));
    if (stat.exists) {
      tars.push_back(url);
    } else {
      result->issues.push_back({url, "", "missing_file",
                                names.size() > 1 ? "named by the brace list " + input +
                                                       " but no such object"
                                                 : "no such object"});
    }
  }
  if (tars.empty()) {
    return Status::NotFound("no object " +
                            (names.size() > 1 ? "of the brace list " + input : input) +
                            " exists (" + std::to_string(names.size()) + " names, the first " +
                            names[0] + ")");
  }
  return tars;
}

// The tars `input` names: a brace list's existing files (each one missing is an issue), a
// folder's .tar files sorted by name, or the one tar; or the same of URLs.
Result<std::vector<fs::path>> ListTars(const std::string& input, IngestResult* result) {
  if (IsRemoteUrl(input)) return ListRemoteTars(input, result);
  std::vector<fs::path> tars;
  std::error_code ec;
  if (!fs::exists(input, ec) && HasBraceGroup(input)) {
    MM_ASSIGN_OR_RETURN(std::vector<std::string> names, ExpandBraces(input));
    for (const std::string& name : names) {
      if (fs::is_regular_file(name, ec)) {
        tars.push_back(name);
      } else {
        result->issues.push_back(
            {name, "", "missing_file", "named by the brace list " + input + " but not a file"});
      }
    }
    if (tars.empty()) {
      return Status::NotFound("no file of the brace list " + input + " exists (" +
                              std::to_string(names.size()) + " names, the first " + names[0] + ")");
    }
    return tars;
  }
  if (!fs::is_directory(input, ec)) return std::vector<fs::path>{input};
  fs::directory_iterator it(input, ec);
  if (ec) return Status::IOError("cannot list " + input + ": " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return Status::IOError("cannot list " + input + ": " + ec.message());
    std::error_code entry_ec;
    if (it->is_regular_file(entry_ec) && AsciiLower(it->path().extension().string()) == ".tar") {
      tars.push_back(it->path());
    }
  }
  std::sort(tars.begin(), tars.end());
  if (tars.empty()) return Status::InvalidArgument(input + ": no .tar files");
  return tars;
}

}  // namespace

Result<IngestResult> IngestWds(const std::string& input, const FieldNames& names,
                               const fs::path& spill_dir) {
  IngestResult result;
  result.format = InputFormat::kWds;
  MM_ASSIGN_OR_RETURN(std::vector<fs::path> tars, ListTars(input, &result));
  MM_ASSIGN_OR_RETURN(result.list, SampleList::Create(spill_dir));
  for (const fs::path& tar : tars) {
    MM_RETURN_NOT_OK(IngestOneTar(tar, tar.filename().string(), names, result.list.get(), &result));
  }
  MM_RETURN_NOT_OK(result.list->Finish());
  // Keys from several tars are prefixed with the tar's name where they would collide (what is
  // still repeated after that, e.g. "a.tar" and "a.TAR", is made unique by MakeKeysUnique).
  if (tars.size() > 1) {
    MM_RETURN_NOT_OK(RekeyRepeated(&result.list, [](const RawSample& s) {
      return fs::path(s.path).stem().string() + "/" + s.key;
    }));
  }
  return result;
}

}  // namespace mm::pack

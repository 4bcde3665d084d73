// ingest.cc: see ingest.h.
#include "ingest.h"

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "tokenizer.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* const kImageExtensions[] = {"jpg", "jpeg", "png", "webp", "gif", "tif", "tiff", "bmp"};

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool IsImageExtension(const std::string& ext_no_dot) {
  std::string e = Lower(ext_no_dot);
  for (const char* x : kImageExtensions) {
    if (e == x) return true;
  }
  return false;
}

// Removes a leading UTF-8 byte-order mark.
void StripBom(std::string* s) {
  if (s->size() >= 3 && static_cast<unsigned char>((*s)[0]) == 0xEF &&
      static_cast<unsigned char>((*s)[1]) == 0xBB && static_cast<unsigned char>((*s)[2]) == 0xBF) {
    s->erase(0, 3);
  }
}

// Removes one trailing "\n" or "\r\n" (what an editor or `echo` adds), nothing more.
void StripOneNewline(std::string* s) {
  if (!s->empty() && s->back() == '\n') {
    s->pop_back();
    if (!s->empty() && s->back() == '\r') s->pop_back();
  }
}

std::string StripExtension(const std::string& path) {
  size_t slash = path.find_last_of('/');
  size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return path;
  if (dot == (slash == std::string::npos ? 0 : slash + 1)) return path;  // ".hidden"
  return path.substr(0, dot);
}

std::string Resolve(const fs::path& base_dir, const std::string& given) {
  fs::path p(given);
  if (p.is_absolute()) return p.string();
  return (base_dir / p).lexically_normal().string();
}

// Keys: the image path as given without its extension; the full path where that collides.
void AssignKeys(std::vector<RawSample>* samples) {
  std::unordered_map<std::string, int> count;
  for (const RawSample& s : *samples) ++count[StripExtension(s.source)];
  for (RawSample& s : *samples) {
    std::string k = StripExtension(s.source);
    s.key = count[k] > 1 ? s.source : k;
  }
}

// Makes keys unique within the set (FORMAT.md; `mmpack verify` rejects a repeated key): the
// first sample with a key keeps it, a later one gets "<key>#<n>" with the smallest n >= 2 that
// no sample uses. Deterministic (input order only). The formats' own key rules should
// already give unique keys; this catches what they cannot (e.g. "a.jpg.png" vs "a.jpg" +
// "a.png", or two tars with the same stem in a multi-tar input).
void MakeKeysUnique(std::vector<RawSample>* samples) {
  std::unordered_set<std::string> original;
  for (const RawSample& s : *samples) original.insert(s.key);
  std::unordered_set<std::string> used;
  for (RawSample& s : *samples) {
    if (used.insert(s.key).second) continue;
    for (int n = 2;; ++n) {
      std::string candidate = s.key + "#" + std::to_string(n);
      if (original.count(candidate) == 0 && used.insert(candidate).second) {
        s.key = std::move(candidate);
        break;
      }
    }
  }
}

// Groups (image, caption) pairs by image, first-appearance order, captions in pair order.
class Grouper {
 public:
  explicit Grouper(fs::path base) : base_(std::move(base)) {}
  void Add(const std::string& image, std::string caption) {
    auto [it, inserted] = index_.emplace(image, samples_.size());
    if (inserted) {
      RawSample s;
      s.source = image;
      s.path = Resolve(base_, image);
      samples_.push_back(std::move(s));
    }
    samples_[it->second].captions.push_back(std::move(caption));
  }
  std::vector<RawSample> Take() {
    AssignKeys(&samples_);
    return std::move(samples_);
  }

 private:
  fs::path base_;
  std::unordered_map<std::string, size_t> index_;
  std::vector<RawSample> samples_;
};

// U+FFFF (a noncharacter) stands in for each invalid byte so the rest of the line still
// parses; a caption holding it is reported as invalid_utf8 by the caption check.
const char kBadByteMark[] = "\xEF\xBF\xBF";

std::string MarkInvalidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  while (!s.empty()) {
    size_t bad = FirstInvalidUtf8(s);
    if (bad == std::string_view::npos) {
      out.append(s);
      break;
    }
    out.append(s.substr(0, bad));
    out.append(kBadByteMark);
    s.remove_prefix(bad + 1);
  }
  return out;
}

const json* FirstField(const json& obj, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    auto it = obj.find(n);
    if (it != obj.end() && !it->is_null()) return &*it;
  }
  return nullptr;
}

Result<IngestResult> IngestJsonl(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return Status::IOError("cannot open " + file.string() + ": " + std::strerror(errno));
  IngestResult result;
  result.format = "jsonl";
  Grouper grouper(file.parent_path());
  std::string line;
  int64_t line_no = 0;
  std::string where = file.filename().string();
  while (std::getline(in, line)) {
    ++line_no;
    if (line_no == 1) StripBom(&line);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    std::string source = where + ":" + std::to_string(line_no);
    bool bad_utf8 = FirstInvalidUtf8(line) != std::string::npos;
    json obj = json::parse(bad_utf8 ? MarkInvalidUtf8(line) : line, nullptr, false);
    if (obj.is_discarded() || !obj.is_object()) {
      result.issues.push_back({source, "", "invalid_manifest_line", "not a JSON object"});
      continue;
    }
    const json* image = FirstField(obj, {"image", "image_path", "file_name"});
    const json* text = FirstField(obj, {"text", "caption"});
    if (image == nullptr || !image->is_string() || image->get_ref<const std::string&>().empty()) {
      result.issues.push_back(
          {source, "", "invalid_manifest_line", "no string field image/image_path/file_name"});
      continue;
    }
    if (text == nullptr || !text->is_string()) {
      result.issues.push_back(
          {source, "", "invalid_manifest_line",
           "no string field text/caption for " + image->get_ref<const std::string&>()});
      continue;
    }
    std::string caption = text->get<std::string>();
    if (bad_utf8) {
      // Put an always-invalid byte back where the input had invalid bytes, so that the
      // caption check reports invalid_utf8 for this caption (and only this one).
      for (size_t at = caption.find(kBadByteMark); at != std::string::npos;
           at = caption.find(kBadByteMark, at + 1)) {
        caption.replace(at, 3, "\xFF");
      }
    }
    if (image->get_ref<const std::string&>().find('\0') != std::string::npos) {
      result.issues.push_back({source, "", "invalid_manifest_line", "image path holds a NUL"});
      continue;
    }
    grouper.Add(image->get<std::string>(), std::move(caption));
  }
  if (in.bad()) return Status::IOError("read error in " + file.string());
  result.samples = grouper.Take();
  return result;
}

// RFC 4180 records: fields separated by `sep`, quoted with '"' ("" inside quotes is a quote),
// records ended by \n or \r\n outside quotes. Without `quoting` (TSV, as IANA's
// text/tab-separated-values and the CC3M/CC12M files have it) a quote is just a character.
Status ParseDelimited(const std::string& text, char sep, bool quoting,
                      std::vector<std::vector<std::string>>* rows,
                      std::vector<int64_t>* row_lines) {
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, field_started = false;
  int64_t line = 1, row_line = 1;
  size_t i = 0, n = text.size();
  auto end_field = [&] {
    row.push_back(std::move(field));
    field.clear();
    field_started = false;
  };
  auto end_row = [&] {
    end_field();
    bool blank = row.size() == 1 && row[0].empty();
    if (!blank) {
      rows->push_back(std::move(row));
      row_lines->push_back(row_line);
    }
    row.clear();
  };
  while (i < n) {
    char c = text[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < n && text[i + 1] == '"') {
          field.push_back('"');
          i += 2;
          continue;
        }
        quoted = false;
        ++i;
        continue;
      }
      if (c == '\n') ++line;
      field.push_back(c);
      ++i;
      continue;
    }
    if (c == '"' && !field_started && quoting) {
      quoted = true;
      field_started = true;
      ++i;
      continue;
    }
    if (c == sep) {
      end_field();
      ++i;
      continue;
    }
    if (c == '\r' && i + 1 < n && text[i + 1] == '\n') {
      ++i;
      continue;
    }
    if (c == '\n') {
      end_row();
      ++line;
      row_line = line;
      ++i;
      continue;
    }
    field.push_back(c);
    field_started = true;
    ++i;
  }
  if (quoted)
    return Status::InvalidArgument("unterminated quoted field at line " + std::to_string(row_line));
  if (!field.empty() || !row.empty()) end_row();
  return Status::OK();
}

Result<IngestResult> IngestDelimited(const fs::path& file, char sep, const std::string& format) {
  std::string text;
  MM_RETURN_NOT_OK(ReadFile(file.string(), &text));
  StripBom(&text);
  std::vector<std::vector<std::string>> rows;
  std::vector<int64_t> lines;
  MM_RETURN_NOT_OK(
      ParseDelimited(text, sep, /*quoting=*/sep != '\t', &rows, &lines).WithContext(file.string()));
  if (rows.empty()) return Status::InvalidArgument(file.string() + ": no header row");
  const std::vector<std::string>& header = rows[0];
  auto column = [&](std::initializer_list<const char*> names) -> int {
    for (const char* name : names) {
      for (size_t c = 0; c < header.size(); ++c) {
        std::string h = header[c];
        while (!h.empty() && (h.back() == ' ' || h.back() == '\r')) h.pop_back();
        if (h == name) return static_cast<int>(c);
      }
    }
    return -1;
  };
  int image_col = column({"image", "image_path", "file_name", "filepath", "url"});
  int text_col = column({"text", "caption", "title"});
  if (image_col < 0 || text_col < 0) {
    return Status::InvalidArgument(file.string() +
                                   ": header needs an image column (image, image_path, "
                                   "file_name) and a text column (text, caption)");
  }
  IngestResult result;
  result.format = format;
  Grouper grouper(file.parent_path());
  std::string where = file.filename().string();
  for (size_t r = 1; r < rows.size(); ++r) {
    const auto& row = rows[r];
    std::string source = where + ":" + std::to_string(lines[r]);
    if (static_cast<int>(row.size()) <= std::max(image_col, text_col) || row[image_col].empty()) {
      result.issues.push_back({source, "", "invalid_manifest_line",
                               "row has " + std::to_string(row.size()) + " fields"});
      continue;
    }
    grouper.Add(row[image_col], row[text_col]);
  }
  result.samples = grouper.Take();
  return result;
}

Result<IngestResult> IngestCoco(const fs::path& file) {
  std::string text;
  MM_RETURN_NOT_OK(ReadFile(file.string(), &text));
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return Status::InvalidArgument(file.string() + ": not a JSON object");
  }
  auto images = doc.find("images");
  auto annotations = doc.find("annotations");
  if (images == doc.end() || !images->is_array() || annotations == doc.end() ||
      !annotations->is_array()) {
    return Status::InvalidArgument(file.string() +
                                   ": COCO captions JSON needs arrays 'images' and 'annotations'");
  }
  IngestResult result;
  result.format = "coco";
  std::string where = file.filename().string();
  fs::path base = file.parent_path();
  // Two `images` entries with different ids but the same file_name are the same image: they
  // become one sample holding the captions of both ids (annotation order), not two samples
  // with the same key (which `mmpack verify` would reject) or the same image twice.
  std::unordered_map<std::string, size_t> by_id;    // id as JSON text -> sample
  std::unordered_map<std::string, size_t> by_file;  // file_name -> sample
  for (size_t i = 0; i < images->size(); ++i) {
    const json& im = (*images)[i];
    std::string source = where + ":images[" + std::to_string(i) + "]";
    if (!im.is_object() || !im.contains("id") || !im.contains("file_name") ||
        !im["file_name"].is_string()) {
      result.issues.push_back({source, "", "invalid_manifest_line", "image without id/file_name"});
      continue;
    }
    std::string file_name = im["file_name"].get<std::string>();
    std::string id = im["id"].dump();
    if (by_id.count(id) != 0) {
      result.issues.push_back({source, "", "duplicate_key", "image id " + id + " repeated"});
      continue;
    }
    auto [file_it, new_file] = by_file.emplace(file_name, result.samples.size());
    by_id.emplace(id, file_it->second);
    if (!new_file) continue;  // same file as an earlier id: that sample gets these captions
    RawSample s;
    s.source = std::move(file_name);
    s.path = Resolve(base, s.source);
    if (!fs::exists(s.path)) {
      std::string alt = Resolve(base / "images", s.source);
      if (fs::exists(alt)) s.path = alt;
    }
    result.samples.push_back(std::move(s));
  }
  for (size_t i = 0; i < annotations->size(); ++i) {
    const json& an = (*annotations)[i];
    std::string source = where + ":annotations[" + std::to_string(i) + "]";
    if (!an.is_object() || !an.contains("image_id") || !an.contains("caption") ||
        !an["caption"].is_string()) {
      result.issues.push_back(
          {source, "", "invalid_manifest_line", "annotation without image_id/caption"});
      continue;
    }
    auto it = by_id.find(an["image_id"].dump());
    if (it == by_id.end()) {
      result.issues.push_back({source, "", "invalid_manifest_line",
                               "annotation for unknown image_id " + an["image_id"].dump()});
      continue;
    }
    result.samples[it->second].captions.push_back(an["caption"].get<std::string>());
  }
  AssignKeys(&result.samples);
  // Images that no annotation describes cannot be samples.
  std::vector<RawSample> kept;
  kept.reserve(result.samples.size());
  for (RawSample& s : result.samples) {
    if (s.captions.empty()) {
      result.issues.push_back({s.source, s.key, "missing_caption", "no annotation"});
    } else {
      kept.push_back(std::move(s));
    }
  }
  result.samples = std::move(kept);
  return result;
}

Result<IngestResult> IngestFiles(const fs::path& root) {
  // rel path without extension -> (image rel paths, txt rel path)
  struct Pair {
    std::vector<std::string> images;
    std::string text;
  };
  std::map<std::string, Pair> pairs;  // sorted bytewise by key
  std::error_code ec;
  fs::recursive_directory_iterator it(root, fs::directory_options::follow_directory_symlink, ec);
  if (ec) return Status::IOError("cannot list " + root.string() + ": " + ec.message());
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) return Status::IOError("cannot list " + root.string() + ": " + ec.message());
    if (!it->is_regular_file(ec)) continue;
    std::string rel = it->path().lexically_relative(root).generic_string();
    std::string ext = it->path().extension().string();
    if (ext.empty()) continue;
    std::string key = StripExtension(rel);
    std::string e = Lower(ext.substr(1));
    if (e == "txt") {
      pairs[key].text = rel;
    } else if (IsImageExtension(e)) {
      pairs[key].images.push_back(rel);
    }
  }
  IngestResult result;
  result.format = "files";
  for (auto& [key, pair] : pairs) {
    if (pair.images.empty()) {
      result.issues.push_back({pair.text, key, "missing_file", "caption file without an image"});
      continue;
    }
    std::sort(pair.images.begin(), pair.images.end());
    for (size_t i = 1; i < pair.images.size(); ++i) {
      result.issues.push_back({pair.images[i], key, "duplicate_key",
                               "another image has the same key: " + pair.images[0]});
    }
    if (pair.text.empty()) {
      result.issues.push_back({pair.images[0], key, "missing_caption", "no " + key + ".txt"});
      continue;
    }
    std::string caption;
    Status st = ReadFile((root / pair.text).string(), &caption);
    if (!st.ok()) {
      result.issues.push_back({pair.text, key, "unreadable", st.message()});
      continue;
    }
    StripBom(&caption);
    StripOneNewline(&caption);
    RawSample s;
    s.key = key;
    s.source = pair.images[0];
    s.path = (root / pair.images[0]).string();
    s.captions.push_back(std::move(caption));
    result.samples.push_back(std::move(s));
  }
  return result;
}

struct ArchiveDeleter {
  void operator()(archive* a) const { archive_read_free(a); }
};
using ArchivePtr = std::unique_ptr<archive, ArchiveDeleter>;

Result<ArchivePtr> OpenTar(const std::string& path) {
  ArchivePtr a(archive_read_new());
  if (!a) return Status::Internal("archive_read_new failed");
  archive_read_support_format_tar(a.get());
  archive_read_support_format_gnutar(a.get());
  archive_read_support_filter_all(a.get());  // .tar.gz etc. also work
  if (archive_read_open_filename(a.get(), path.c_str(), 1 << 16) != ARCHIVE_OK) {
    std::string msg = archive_error_string(a.get()) ? archive_error_string(a.get()) : "";
    if (!fs::exists(path)) return Status::NotFound("no such file: " + path);
    return Status::IOError("cannot open tar " + path + ": " + msg);
  }
  return a;
}

Status ReadMemberData(archive* a, std::string* bytes) {
  bytes->clear();
  la_int64_t size = 0;
  (void)size;
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
    if (static_cast<size_t>(offset) > bytes->size()) bytes->resize(offset, '\0');
    bytes->append(static_cast<const char*>(buf), len);
  }
  return Status::OK();
}

// Appends the samples of one tar to `result`.
Status IngestOneTar(const fs::path& tar, const std::string& tar_label, IngestResult* result) {
  MM_ASSIGN_OR_RETURN(ArchivePtr a, OpenTar(tar.string()));
  struct Group {
    std::string image;
    int64_t image_index = -1;
    std::vector<std::string> captions;
  };
  std::vector<std::string> order;
  std::unordered_map<std::string, Group> groups;
  archive_entry* entry;
  int64_t index = -1;
  for (;;) {
    int r = archive_read_next_header(a.get(), &entry);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN) {
      const char* msg = archive_error_string(a.get());
      result->issues.push_back(
          {tar_label, "", "unreadable", std::string("tar read error: ") + (msg ? msg : "unknown")});
      break;  // keep what was read before the damage
    }
    ++index;
    if (archive_entry_filetype(entry) != AE_IFREG) continue;
    const char* name_c = archive_entry_pathname(entry);
    if (name_c == nullptr) continue;
    std::string name = name_c;
    size_t slash = name.find_last_of('/');
    size_t base_start = slash == std::string::npos ? 0 : slash + 1;
    size_t dot = name.find('.', base_start);
    if (dot == std::string::npos || dot == base_start) continue;
    std::string key = name.substr(0, dot);
    // WebDataset field names: "jpg", "txt", also "caption", "0.txt", "en.caption".
    std::string ext = Lower(name.substr(dot + 1));
    std::string last = ext.substr(ext.find_last_of('.') + 1);
    bool is_text = last == "txt" || last == "caption" || last == "text";
    bool is_image = IsImageExtension(last);
    if (!is_text && !is_image) continue;
    auto [git, inserted] = groups.try_emplace(key);
    if (inserted) order.push_back(key);
    Group& g = git->second;
    if (is_image) {
      if (g.image.empty()) {
        g.image = name;
        g.image_index = index;
      } else {
        result->issues.push_back({tar_label + ":" + name, key, "duplicate_key",
                                  "another image member has the same key: " + g.image});
      }
    } else {
      std::string caption;
      Status st = ReadMemberData(a.get(), &caption);
      if (!st.ok()) {
        result->issues.push_back({tar_label + ":" + name, key, "unreadable", st.message()});
        break;
      }
      StripBom(&caption);
      StripOneNewline(&caption);
      g.captions.push_back(std::move(caption));
    }
  }
  for (const std::string& key : order) {
    Group& g = groups[key];
    if (g.image.empty()) {
      result->issues.push_back(
          {tar_label + ":" + key, key, "missing_file", "caption member without an image member"});
      continue;
    }
    if (g.captions.empty()) {
      result->issues.push_back(
          {tar_label + ":" + g.image, key, "missing_caption", "no .txt/.caption member"});
      continue;
    }
    RawSample s;
    s.key = key;
    s.source = tar_label + ":" + g.image;
    s.path = tar.string();
    s.tar_member = g.image;
    s.tar_member_index = g.image_index;
    s.captions = std::move(g.captions);
    result->samples.push_back(std::move(s));
  }
  return Status::OK();
}

Result<IngestResult> IngestWds(const fs::path& input) {
  IngestResult result;
  result.format = "wds";
  std::vector<fs::path> tars;
  if (fs::is_directory(input)) {
    for (const auto& e : fs::directory_iterator(input)) {
      if (e.is_regular_file() && Lower(e.path().extension().string()) == ".tar") {
        tars.push_back(e.path());
      }
    }
    std::sort(tars.begin(), tars.end());
    if (tars.empty()) return Status::InvalidArgument(input.string() + ": no .tar files");
  } else {
    tars.push_back(input);
  }
  bool many = tars.size() > 1;
  for (const fs::path& tar : tars) {
    std::string label = tar.filename().string();
    size_t before = result.samples.size();
    MM_RETURN_NOT_OK(IngestOneTar(tar, label, &result));
    (void)before;
  }
  // Keys from several tars are prefixed with the tar's name where they would collide (what is
  // still repeated after that, e.g. "a.tar" and "a.TAR", is made unique by MakeKeysUnique).
  if (many) {
    std::unordered_map<std::string, int> count;
    for (const RawSample& s : result.samples) ++count[s.key];
    for (RawSample& s : result.samples) {
      if (count[s.key] > 1) s.key = fs::path(s.path).stem().string() + "/" + s.key;
    }
  }
  return result;
}

}  // namespace

Status ReadFile(const std::string& path, std::string* bytes) {
  bytes->clear();
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    int err = errno;
    if (err == ENOENT || err == ENOTDIR) return Status::NotFound("no such file: " + path);
    return Status::IOError("cannot open " + path + ": " + std::strerror(err));
  }
  std::unique_ptr<FILE, int (*)(FILE*)> owner(f, &std::fclose);
  char buf[1 << 16];
  for (;;) {
    size_t n = std::fread(buf, 1, sizeof buf, f);
    bytes->append(buf, n);
    if (n < sizeof buf) {
      if (std::ferror(f)) {
        return Status::IOError("cannot read " + path + ": " + std::strerror(errno));
      }
      break;
    }
  }
  return Status::OK();
}

// A set folder such as ../shared/data/coco-cc: no pairs at its top level, but one manifest
// (preferring .jsonl, then .csv, .tsv, .json). Returns the manifest, or "" when the folder is
// not like that.
std::string ManifestInFolder(const fs::path& dir) {
  std::error_code ec;
  std::map<std::string, std::vector<fs::path>> by_ext;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file()) continue;
    std::string ext = Lower(e.path().extension().string());
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

Result<std::string> DetectInputFormat(const std::string& input) {
  std::error_code ec;
  fs::path p(input);
  if (!fs::exists(p, ec)) return Status::NotFound("no such file or directory: " + input);
  if (fs::is_directory(p, ec)) {
    std::string manifest = ManifestInFolder(p);
    if (!manifest.empty()) return DetectInputFormat(manifest);
    bool has_tar = false, has_image = false;
    for (const auto& e : fs::directory_iterator(p, ec)) {
      if (!e.is_regular_file()) continue;
      std::string ext = Lower(e.path().extension().string());
      if (ext == ".tar") has_tar = true;
      if (ext.size() > 1 && IsImageExtension(ext.substr(1))) has_image = true;
    }
    return std::string(has_tar && !has_image ? "wds" : "files");
  }
  std::string ext = Lower(p.extension().string());
  if (ext == ".jsonl" || ext == ".ndjson") return std::string("jsonl");
  if (ext == ".csv") return std::string("csv");
  if (ext == ".tsv" || ext == ".tab") return std::string("tsv");
  if (ext == ".tar") return std::string("wds");
  if (ext == ".json") {
    // A COCO file is one JSON object; a JSONL file named .json has one object a line.
    std::ifstream in(p, std::ios::binary);
    std::string first;
    std::getline(in, first);
    json line = json::parse(first, nullptr, false);
    if (!line.is_discarded() && line.is_object() &&
        (line.contains("image") || line.contains("image_path") || line.contains("file_name")) &&
        !line.contains("images")) {
      return std::string("jsonl");
    }
    return std::string("coco");
  }
  return Status::InvalidArgument("cannot tell the input format of " + input +
                                 " (expected a folder, .jsonl, .csv, .tsv, .json or .tar); "
                                 "pass --input-format");
}

namespace {

Result<IngestResult> IngestAny(const std::string& input, const std::string& format_in) {
  std::string format = format_in;
  std::error_code ec;
  fs::path p(input);
  if (format.empty() || format == "auto") {
    MM_ASSIGN_OR_RETURN(format, DetectInputFormat(input));
    if (fs::is_directory(p, ec)) {
      std::string manifest = ManifestInFolder(p);
      if (!manifest.empty()) p = manifest;
    }
  }
  if (!fs::exists(p, ec)) return Status::NotFound("no such file or directory: " + input);
  if (format == "files") {
    if (!fs::is_directory(p)) return Status::InvalidArgument(input + " is not a folder");
    return IngestFiles(p);
  }
  if (format == "wds") return IngestWds(p);
  if (fs::is_directory(p)) {
    return Status::InvalidArgument(input + " is a folder; --input-format " + format +
                                   " needs a file");
  }
  if (format == "jsonl") return IngestJsonl(p);
  if (format == "csv") return IngestDelimited(p, ',', "csv");
  if (format == "tsv") return IngestDelimited(p, '\t', "tsv");
  if (format == "coco") return IngestCoco(p);
  return Status::InvalidArgument("unknown input format '" + format + "'");
}

}  // namespace

Result<IngestResult> Ingest(const std::string& input, const std::string& format_in) {
  MM_ASSIGN_OR_RETURN(IngestResult result, IngestAny(input, format_in));
  MakeKeysUnique(&result.samples);
  return result;
}

struct ImageReader::Tar {
  std::string path;
  ArchivePtr archive;
  int64_t next_index = 0;  // index of the header the next archive_read_next_header returns
};

ImageReader::ImageReader() = default;
ImageReader::~ImageReader() = default;

Status ImageReader::Read(const RawSample& sample, std::string* bytes) {
  if (sample.tar_member_index < 0) return ReadFile(sample.path, bytes);
  if (!tar_ || tar_->path != sample.path || tar_->next_index > sample.tar_member_index) {
    MM_ASSIGN_OR_RETURN(ArchivePtr a, OpenTar(sample.path));
    tar_ = std::make_unique<Tar>();
    tar_->path = sample.path;
    tar_->archive = std::move(a);
  }
  archive_entry* entry;
  while (tar_->next_index <= sample.tar_member_index) {
    int r = archive_read_next_header(tar_->archive.get(), &entry);
    if (r == ARCHIVE_EOF || r < ARCHIVE_WARN) {
      tar_.reset();
      return Status::NotFound("tar member " + sample.tar_member + " not found in " + sample.path);
    }
    ++tar_->next_index;
  }
  Status st = ReadMemberData(tar_->archive.get(), bytes);
  if (!st.ok()) tar_.reset();
  return st;
}

}  // namespace mm::pack

// ingest.cc: see ingest.h.
#include "ingest/ingest.h"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>
#include <unistd.h>

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

#include "text/ascii.h"
#include "mm/internal/c_handles.h"
#include "mm/internal/file.h"
#include "mm/internal/utf8.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// The most bytes read of one caption file (folder .txt or tar text member): far above any
// real caption (a 100 KB one is long), far below what would exhaust memory (a 50 GB sparse
// .txt). A larger one is an issue, file_too_large.
constexpr int64_t kMaxCaptionFileBytes = int64_t{16} << 20;

const char* const kImageExtensions[] = {"jpg", "jpeg", "png", "webp", "gif", "tif", "tiff", "bmp"};

bool IsImageExtension(const std::string& ext_no_dot) {
  std::string e = AsciiLower(ext_no_dot);
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

// JSON text that no UTF-8 string can hold (RFC 8259 strings are Unicode): a byte that breaks
// UTF-8, or a \u escape of a lone surrogate ("\ud800" with no low half after it, or a low
// half alone). nlohmann::json refuses the whole text for either, which would lose every good
// caption of a COCO file, or a whole JSONL line with a misleading message. NeutralizeJson
// puts a mark in their place so the rest parses; RestoreInvalid turns the mark in a parsed
// caption back into an invalid byte, so that the caption check reports that caption (and
// only that one) as invalid_utf8. The mark is a noncharacter (U+FFFF, U+FFFE, U+FDD0..
// U+FDEF) that the text does not already hold, raw or escaped, so no good caption is hit.
struct NeutralJson {
  std::string text;
  std::string mark;  // UTF-8 of the mark code point
  bool changed = false;
};

bool IsHex4(std::string_view s, size_t at, uint32_t* cp) {
  if (at + 4 > s.size()) return false;
  uint32_t v = 0;
  for (size_t k = at; k < at + 4; ++k) {
    const char c = s[k];
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0) return false;
    v = v << 4 | static_cast<uint32_t>(d);
  }
  *cp = v;
  return true;
}

NeutralJson NeutralizeJson(std::string_view text) {
  NeutralJson out;
  // Lone surrogate escapes and invalid bytes: is there anything to do at all?
  std::vector<size_t> lone;  // offsets of the backslash of lone surrogate escapes
  for (size_t i = 0; i + 1 < text.size(); ++i) {
    if (text[i] != '\\') continue;
    uint32_t cp, low;
    if (text[i + 1] == 'u' && IsHex4(text, i + 2, &cp)) {
      if (cp >= 0xD800 && cp <= 0xDBFF && i + 7 < text.size() && text[i + 6] == '\\' &&
          text[i + 7] == 'u' && IsHex4(text, i + 8, &low) && low >= 0xDC00 && low <= 0xDFFF) {
        i += 11;  // a proper pair
        continue;
      }
      if (cp >= 0xD800 && cp <= 0xDFFF) lone.push_back(i);
      i += 5;
      continue;
    }
    ++i;  // any other escape, \\ included
  }
  const bool bad_bytes = FirstInvalidUtf8(text) != std::string_view::npos;
  if (lone.empty() && !bad_bytes) {
    out.text.assign(text);
    return out;
  }
  out.changed = true;
  const std::string lower = AsciiLower(text);
  uint32_t mark = 0xFFFF;
  std::vector<uint32_t> candidates = {0xFFFF, 0xFFFE};
  for (uint32_t c = 0xFDD0; c <= 0xFDEF; ++c) candidates.push_back(c);
  for (uint32_t c : candidates) {
    char raw[4] = {static_cast<char>(0xE0 | (c >> 12)), static_cast<char>(0x80 | ((c >> 6) & 0x3F)),
                   static_cast<char>(0x80 | (c & 0x3F)), 0};
    char esc[8];
    std::snprintf(esc, sizeof esc, "\\u%04x", static_cast<unsigned>(c));
    if (text.find(raw) == std::string_view::npos && lower.find(esc) == std::string::npos) {
      mark = c;
      break;
    }
  }
  out.mark = {static_cast<char>(0xE0 | (mark >> 12)),
              static_cast<char>(0x80 | ((mark >> 6) & 0x3F)),
              static_cast<char>(0x80 | (mark & 0x3F))};
  char mark_escape[8];
  std::snprintf(mark_escape, sizeof mark_escape, "\\u%04X", static_cast<unsigned>(mark));
  out.text.reserve(text.size() + 16);
  size_t next_lone = 0;
  for (size_t i = 0; i < text.size();) {
    if (next_lone < lone.size() && lone[next_lone] == i) {
      out.text.append(mark_escape);  // same length as the escape it replaces
      i += 6;
      ++next_lone;
      continue;
    }
    // Copy up to the next lone escape, marking invalid bytes on the way.
    const size_t end = next_lone < lone.size() ? lone[next_lone] : text.size();
    std::string_view part = text.substr(i, end - i);
    while (!part.empty()) {
      size_t bad = FirstInvalidUtf8(part);
      if (bad == std::string_view::npos) {
        out.text.append(part);
        break;
      }
      out.text.append(part.substr(0, bad));
      out.text.append(out.mark);
      part.remove_prefix(bad + 1);
    }
    i = end;
  }
  return out;
}

// Where `mark` stands in a parsed string, puts back a byte that is never valid UTF-8.
void RestoreInvalid(std::string* s, const std::string& mark) {
  if (mark.empty()) return;
  for (size_t at = s->find(mark); at != std::string::npos; at = s->find(mark, at + 1)) {
    s->replace(at, mark.size(), "\xFF");
  }
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
  if (!in) return ErrnoStatus(errno, "cannot open " + file.string());
  IngestResult result;
  result.format = InputFormat::kJsonl;
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
    NeutralJson neutral = NeutralizeJson(line);
    json obj;
    std::string parse_error;
    try {
      obj = json::parse(neutral.text);
    } catch (const json::exception& e) {
      parse_error = e.what();
    }
    if (!parse_error.empty() || !obj.is_object()) {
      result.issues.push_back(
          {source, "", "invalid_manifest_line",
           parse_error.empty() ? "not a JSON object" : "not a JSON object: " + parse_error});
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
    if (neutral.changed) RestoreInvalid(&caption, neutral.mark);
    if (image->get_ref<const std::string&>().find('\0') != std::string::npos) {
      result.issues.push_back({source, "", "invalid_manifest_line", "image path holds a NUL"});
      continue;
    }
    if (neutral.changed &&
        image->get_ref<const std::string&>().find(neutral.mark) != std::string::npos) {
      result.issues.push_back({source, "", "invalid_utf8",
                               "image path is not valid UTF-8 (an invalid byte or a lone "
                               "surrogate escape)"});
      continue;
    }
    grouper.Add(image->get<std::string>(), std::move(caption));
  }
  if (in.bad()) return Status::IOError("read error in " + file.string());
  result.samples = grouper.Take();
  return result;
}

// One record ParseDelimited could not read: its first line and why.
struct BadRecord {
  int64_t line;
  std::string why;
};

// RFC 4180 records: fields separated by `sep`, quoted with '"' ("" inside quotes is a quote),
// records ended by \n or \r\n outside quotes. Without `quoting` (TSV, as IANA's
// text/tab-separated-values and the CC3M/CC12M files have it) a quote is just a character.
// A malformed record (a quote never closed, or text right after a closing quote, as a stray
// quote that pairs with one rows later leaves it) is reported in `bad` and only its first
// line is lost: parsing starts again on the line after it, so the rows a stray quote would
// swallow are read as rows.
void ParseDelimited(const std::string& text, char sep, bool quoting,
                    std::vector<std::vector<std::string>>* rows, std::vector<int64_t>* row_lines,
                    std::vector<BadRecord>* bad) {
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, field_started = false, after_quote = false;
  int64_t line = 1, row_line = 1;
  size_t i = 0, n = text.size(), row_start = 0;
  auto end_field = [&] {
    row.push_back(std::move(field));
    field.clear();
    field_started = false;
    after_quote = false;
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
  // Drops the record begun at row_start and resumes on the line after its first line.
  auto restart = [&](const char* why) {
    bad->push_back({row_line, why});
    row.clear();
    field.clear();
    quoted = field_started = after_quote = false;
    size_t nl = text.find('\n', row_start);
    i = nl == std::string::npos ? n : nl + 1;
    line = row_line + 1;
    row_line = line;
    row_start = i;
  };
  for (;;) {
    if (i >= n) {
      if (!quoted) break;
      restart("a quoted field is never closed");  // resumes on the record's second line
      continue;
    }
    char c = text[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < n && text[i + 1] == '"') {
          field.push_back('"');
          i += 2;
          continue;
        }
        quoted = false;
        after_quote = true;
        ++i;
        continue;
      }
      if (c == '\n') ++line;
      field.push_back(c);
      ++i;
      continue;
    }
    if (after_quote && c != sep && c != '\n' && !(c == '\r' && i + 1 < n && text[i + 1] == '\n')) {
      restart("text after the closing quote of a field (a stray or unescaped quote?)");
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
      row_start = i;
      continue;
    }
    field.push_back(c);
    field_started = true;
    ++i;
  }
  if (!field.empty() || !row.empty() || field_started) end_row();
}

Result<IngestResult> IngestDelimited(const fs::path& file, char sep, InputFormat format) {
  std::string text;
  MM_RETURN_NOT_OK(ReadRegularFile(file.string(), &text));
  StripBom(&text);
  std::vector<std::vector<std::string>> rows;
  std::vector<int64_t> lines;
  std::vector<BadRecord> bad;
  IngestResult result;
  result.format = format;
  // A ".csv" whose header has no comma but a semicolon is ';'-separated (as spreadsheets in
  // many locales save "CSV").
  const std::string first_line = text.substr(0, text.find('\n'));
  if (sep == ',' && first_line.find(',') == std::string::npos &&
      first_line.find(';') != std::string::npos) {
    sep = ';';
    result.notes.push_back(file.filename().string() +
                           ": read as ';'-separated (the header has "
                           "no comma)");
  }
  ParseDelimited(text, sep, /*quoting=*/sep != '\t', &rows, &lines, &bad);
  if (!bad.empty() && bad[0].line == 1) {
    return Status::InvalidArgument(file.string() + ": malformed header row: " + bad[0].why);
  }
  if (rows.empty()) return Status::InvalidArgument(file.string() + ": no header row");
  const std::vector<std::string>& header = rows[0];
  // Header names match without regard to ASCII case and surrounding blanks.
  auto column = [&](std::initializer_list<const char*> names) -> int {
    for (const char* name : names) {
      for (size_t c = 0; c < header.size(); ++c) {
        std::string h = AsciiLower(header[c]);
        const size_t from = h.find_first_not_of(" \t\r");
        const size_t to = h.find_last_not_of(" \t\r");
        h = from == std::string::npos ? std::string() : h.substr(from, to - from + 1);
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
                                   "file_name, filepath, url) and a text column (text, "
                                   "caption, title); its first line is '" +
                                   first_line.substr(0, 200) + "'");
  }
  Grouper grouper(file.parent_path());
  std::string where = file.filename().string();
  for (const BadRecord& b : bad) {
    result.issues.push_back({where + ":" + std::to_string(b.line), "", "invalid_manifest_line",
                             "malformed row: " + b.why +
                                 "; the row is skipped and reading "
                                 "goes on at the next line"});
  }
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
  MM_RETURN_NOT_OK(ReadRegularFile(file.string(), &text));
  NeutralJson neutral = NeutralizeJson(text);
  std::string().swap(text);
  json doc;
  try {
    doc = json::parse(neutral.text);
  } catch (const json::exception& e) {
    return Status::InvalidArgument(file.string() + ": not valid JSON: " + e.what());
  }
  std::string().swap(neutral.text);
  if (!doc.is_object()) return Status::InvalidArgument(file.string() + ": not a JSON object");
  auto images = doc.find("images");
  auto annotations = doc.find("annotations");
  if (images == doc.end() || !images->is_array() || annotations == doc.end() ||
      !annotations->is_array()) {
    return Status::InvalidArgument(file.string() +
                                   ": COCO captions JSON needs arrays 'images' and 'annotations'");
  }
  IngestResult result;
  result.format = InputFormat::kCoco;
  std::string where = file.filename().string();
  fs::path base = file.parent_path();
  // Two `images` entries with different ids but the same file_name are the same image: they
  // become one sample holding the captions of both ids (annotation order), not two samples
  // with the same key (which `mmpack verify` would reject) or the same image twice.
  std::unordered_map<std::string, size_t> by_id;    // id as JSON text -> sample
  std::unordered_map<std::string, size_t> by_file;  // file_name -> sample
  std::unordered_set<std::string> unstorable_ids;   // images reported as invalid_utf8
  for (size_t i = 0; i < images->size(); ++i) {
    const json& im = (*images)[i];
    std::string source = where + ":images[" + std::to_string(i) + "]";
    if (!im.is_object() || !im.contains("id") || !im.contains("file_name") ||
        !im["file_name"].is_string()) {
      result.issues.push_back({source, "", "invalid_manifest_line", "image without id/file_name"});
      continue;
    }
    std::string file_name = im["file_name"].get<std::string>();
    if (neutral.changed && file_name.find(neutral.mark) != std::string::npos) {
      result.issues.push_back({source, "", "invalid_utf8",
                               "file_name is not valid UTF-8 (an invalid byte or a lone "
                               "surrogate escape)"});
      unstorable_ids.insert(im["id"].dump());  // its annotations go with it, unreported
      continue;
    }
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
    std::error_code ec;
    if (!fs::exists(s.path, ec)) {
      std::string alt = Resolve(base / "images", s.source);
      if (fs::exists(alt, ec)) s.path = alt;
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
    if (it == by_id.end() && unstorable_ids.count(an["image_id"].dump()) != 0) continue;
    if (it == by_id.end()) {
      result.issues.push_back({source, "", "invalid_manifest_line",
                               "annotation for unknown image_id " + an["image_id"].dump()});
      continue;
    }
    std::string caption = an["caption"].get<std::string>();
    if (neutral.changed) RestoreInvalid(&caption, neutral.mark);
    result.samples[it->second].captions.push_back(std::move(caption));
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

// The regular files under `root` (links followed), each folder read once: a folder reached
// again (a symlink loop such as `a/up -> ..`, or a second link to the same folder) is not
// read again, which also ends what would otherwise recurse without end. Entries of a folder
// are visited in bytewise name order, so which of two links to one folder is read does not
// depend on the file system's listing order. An entry whose status cannot be read (a link
// to itself, a dangling link) is not a file. A subfolder that cannot be listed becomes an
// `unreadable` issue; the root itself failing is an error.
Status ListTree(const fs::path& root, std::vector<fs::path>* files, IngestResult* result) {
  struct stat root_st;
  if (::stat(root.c_str(), &root_st) != 0) {
    return ErrnoStatus(errno, "cannot list " + root.string());
  }
  std::set<std::pair<dev_t, ino_t>> seen = {{root_st.st_dev, root_st.st_ino}};
  std::vector<fs::path> stack = {root};
  while (!stack.empty()) {
    fs::path dir = std::move(stack.back());
    stack.pop_back();
    std::error_code ec;
    fs::directory_iterator it(dir, ec);
    std::vector<fs::path> entries;
    for (; !ec && it != fs::directory_iterator(); it.increment(ec)) entries.push_back(it->path());
    if (ec) {
      if (dir == root) return Status::IOError("cannot list " + root.string() + ": " + ec.message());
      result->issues.push_back({dir.lexically_relative(root).generic_string(), "", "unreadable",
                                "cannot list folder: " + ec.message()});
      continue;
    }
    std::sort(entries.begin(), entries.end());
    std::vector<fs::path> subdirs;
    for (fs::path& e : entries) {
      struct stat st;
      if (::stat(e.c_str(), &st) != 0) continue;
      if (S_ISREG(st.st_mode)) {
        files->push_back(std::move(e));
      } else if (S_ISDIR(st.st_mode)) {
        if (seen.insert({st.st_dev, st.st_ino}).second) {
          subdirs.push_back(std::move(e));
        } else {
          result->notes.push_back(e.lexically_relative(root).generic_string() +
                                  ": a folder already read (symlink loop or second link); "
                                  "not read again");
        }
      }
    }
    // Depth first, in name order.
    for (auto d = subdirs.rbegin(); d != subdirs.rend(); ++d) stack.push_back(std::move(*d));
  }
  return Status::OK();
}

Result<IngestResult> IngestFiles(const fs::path& root) {
  // rel path without extension -> (image rel paths, txt rel path)
  struct Pair {
    std::vector<std::string> images;
    std::string text;
  };
  IngestResult result;
  result.format = InputFormat::kFiles;
  std::map<std::string, Pair> pairs;  // sorted bytewise by key
  std::vector<fs::path> files;
  MM_RETURN_NOT_OK(ListTree(root, &files, &result));
  for (const fs::path& file : files) {
    std::string rel = file.lexically_relative(root).generic_string();
    std::string ext = file.extension().string();
    if (ext.empty()) continue;
    std::string key = StripExtension(rel);
    std::string e = AsciiLower(ext.substr(1));
    if (e == "txt") {
      pairs[key].text = rel;
    } else if (IsImageExtension(e)) {
      pairs[key].images.push_back(rel);
    }
  }
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
    Status st = ReadRegularFile((root / pair.text).string(), &caption, kMaxCaptionFileBytes);
    if (!st.ok()) {
      result.issues.push_back(
          {pair.text, key, st.code() == StatusCode::kOutOfRange ? "file_too_large" : "unreadable",
           st.message()});
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

Result<ArchiveReadPtr> OpenTar(const std::string& path) {
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
  return a;
}

// Reads the current member's data. A sparse member (GNU/PAX sparse maps) is refused at its
// first hole, before anything is allocated for it: a 60-byte member can declare a 60 GB
// hole, and holes are never image or caption bytes. Errors: Unsupported (a sparse member;
// the archive can go on to the next header), IOError (the archive is damaged).
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

// Appends the samples of one tar to `result`.
Status IngestOneTar(const fs::path& tar, const std::string& tar_label, IngestResult* result) {
  MM_ASSIGN_OR_RETURN(ArchiveReadPtr a, OpenTar(tar.string()));
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
    std::string ext = AsciiLower(name.substr(dot + 1));
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
      if (archive_entry_size_is_set(entry) != 0 &&
          archive_entry_size(entry) > kMaxCaptionFileBytes) {
        result->issues.push_back({tar_label + ":" + name, key, "file_too_large",
                                  "caption member of " + std::to_string(archive_entry_size(entry)) +
                                      " bytes, over the " + std::to_string(kMaxCaptionFileBytes) +
                                      " bytes read of one caption"});
        continue;  // its data is skipped by the next header read
      }
      std::string caption;
      Status st = ReadMemberData(a.get(), &caption);
      if (!st.ok()) {
        result->issues.push_back({tar_label + ":" + name, key, "unreadable", st.message()});
        if (st.code() == StatusCode::kUnsupported) continue;  // the next member is readable
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
  result.format = InputFormat::kWds;
  std::vector<fs::path> tars;
  std::error_code ec;
  if (fs::is_directory(input, ec)) {
    fs::directory_iterator it(input, ec);
    if (ec) return Status::IOError("cannot list " + input.string() + ": " + ec.message());
    for (; it != fs::directory_iterator(); it.increment(ec)) {
      if (ec) return Status::IOError("cannot list " + input.string() + ": " + ec.message());
      std::error_code entry_ec;
      if (it->is_regular_file(entry_ec) && AsciiLower(it->path().extension().string()) == ".tar") {
        tars.push_back(it->path());
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

// A set folder such as ../shared/data/coco-cc: no pairs at its top level, but one manifest
// (preferring .jsonl, then .csv, .tsv, .json). Returns the manifest, or "" when the folder is
// not like that.
std::string ManifestInFolder(const fs::path& dir) {
  std::error_code ec;
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
  std::string ext = AsciiLower(p.extension().string());
  if (ext == ".jsonl" || ext == ".ndjson") return InputFormat::kJsonl;
  if (ext == ".csv") return InputFormat::kCsv;
  if (ext == ".tsv" || ext == ".tab") return InputFormat::kTsv;
  if (ext == ".tar") return InputFormat::kWds;
  if (ext == ".json") {
    // A COCO file is one JSON object; a JSONL file named .json has one object a line.
    std::ifstream in(p, std::ios::binary);
    std::string first;
    std::getline(in, first);
    json line = json::parse(first, nullptr, false);
    if (!line.is_discarded() && line.is_object() &&
        (line.contains("image") || line.contains("image_path") || line.contains("file_name")) &&
        !line.contains("images")) {
      return InputFormat::kJsonl;
    }
    return InputFormat::kCoco;
  }
  return Status::InvalidArgument("cannot tell the input format of " + input +
                                 " (expected a folder, .jsonl, .csv, .tsv, .json or .tar); "
                                 "pass --input-format");
}

namespace {

Result<IngestResult> IngestAny(const std::string& input, InputFormat format) {
  std::error_code ec;
  fs::path p(input);
  if (format == InputFormat::kAuto) {
    MM_ASSIGN_OR_RETURN(format, DetectInputFormat(input));
    if (fs::is_directory(p, ec)) {
      std::string manifest = ManifestInFolder(p);
      if (!manifest.empty()) p = manifest;
    }
  }
  if (!fs::exists(p, ec)) return Status::NotFound("no such file or directory: " + input);
  if (format == InputFormat::kFiles) {
    if (!fs::is_directory(p, ec)) return Status::InvalidArgument(input + " is not a folder");
    return IngestFiles(p);
  }
  if (format == InputFormat::kWds) return IngestWds(p);
  if (fs::is_directory(p, ec)) {
    return Status::InvalidArgument(input + " is a folder; --input-format " +
                                   std::string(ToString(format)) + " needs a file");
  }
  {
    // A manifest saved as UTF-16 ("Unicode" in some editors) fails every line as "not JSON"
    // or every header name; say what it is instead.
    char head[2] = {0, 0};
    std::ifstream in(p, std::ios::binary);
    in.read(head, 2);
    const unsigned char b0 = static_cast<unsigned char>(head[0]),
                        b1 = static_cast<unsigned char>(head[1]);
    if (in.gcount() == 2 && ((b0 == 0xFF && b1 == 0xFE) || (b0 == 0xFE && b1 == 0xFF))) {
      return Status::InvalidArgument(
          input + " is UTF-16 text (byte-order mark " + (b0 == 0xFF ? "FF FE" : "FE FF") +
          "); mmpack reads UTF-8 manifests: convert it, e.g. iconv -f UTF-16 -t UTF-8");
    }
  }
  switch (format) {
    case InputFormat::kJsonl:
      return IngestJsonl(p);
    case InputFormat::kCsv:
      return IngestDelimited(p, ',', InputFormat::kCsv);
    case InputFormat::kTsv:
      return IngestDelimited(p, '\t', InputFormat::kTsv);
    case InputFormat::kCoco:
      return IngestCoco(p);
    default:
      return Status::Internal("input format " + std::string(ToString(format)) + " not handled");
  }
}

}  // namespace

namespace {

// "caf\xE9.jpg": the bytes of `s` with each byte that breaks UTF-8 written as \xHH, so a
// report can name a file whose name is not UTF-8.
std::string EscapeInvalidUtf8(std::string_view s) {
  std::string out;
  while (!s.empty()) {
    size_t bad = FirstInvalidUtf8(s);
    if (bad == std::string_view::npos) bad = s.size();
    out.append(s.substr(0, bad));
    if (bad == s.size()) break;
    char hex[8];
    std::snprintf(hex, sizeof hex, "\\x%02X", static_cast<unsigned char>(s[bad]));
    out.append(hex);
    s.remove_prefix(bad + 1);
  }
  return out;
}

// Sources and keys are UTF-8 strings in the shards (FORMAT.md) and cannot hold a NUL: a
// sample whose image path (file name, tar member or tar name) is not valid UTF-8 is
// reported as invalid_utf8 instead of being written into a set that `mmpack verify` rejects.
void DropUnstorableNames(IngestResult* result) {
  std::vector<RawSample> kept;
  kept.reserve(result->samples.size());
  for (RawSample& s : result->samples) {
    const size_t bad = FirstInvalidUtf8(s.source);
    if (bad != std::string_view::npos || FirstInvalidUtf8(s.key) != std::string_view::npos) {
      const std::string shown = EscapeInvalidUtf8(s.source);
      result->issues.push_back({shown, EscapeInvalidUtf8(s.key), "invalid_utf8",
                                "image path '" + shown +
                                    "' is not valid UTF-8, so it cannot be stored as the "
                                    "sample's source; rename it"});
      continue;
    }
    if (s.source.find('\0') != std::string::npos || s.key.find('\0') != std::string::npos) {
      result->issues.push_back({s.source.substr(0, s.source.find('\0')), "",
                                "invalid_manifest_line", "image path holds a NUL"});
      continue;
    }
    kept.push_back(std::move(s));
  }
  result->samples = std::move(kept);
}

}  // namespace

std::string_view ToString(InputFormat format) {
  switch (format) {
    case InputFormat::kFiles:
      return "files";
    case InputFormat::kJsonl:
      return "jsonl";
    case InputFormat::kCsv:
      return "csv";
    case InputFormat::kTsv:
      return "tsv";
    case InputFormat::kCoco:
      return "coco";
    case InputFormat::kWds:
      return "wds";
    case InputFormat::kAuto:
      break;
  }
  return "auto";
}

std::optional<InputFormat> ParseInputFormat(std::string_view text) {
  for (InputFormat f : kInputFormats) {
    if (text == ToString(f)) return f;
  }
  return std::nullopt;
}

Result<IngestResult> Ingest(const std::string& input, InputFormat format) {
  MM_ASSIGN_OR_RETURN(IngestResult result, IngestAny(input, format));
  DropUnstorableNames(&result);
  MakeKeysUnique(&result.samples);
  return result;
}

struct ImageReader::Tar {
  std::string path;
  ArchiveReadPtr archive;
  int64_t next_index = 0;  // index of the header the next archive_read_next_header returns
};

ImageReader::ImageReader() = default;
ImageReader::~ImageReader() = default;

Status ImageReader::Read(const RawSample& sample, std::string* bytes, int64_t max_bytes) {
  if (sample.tar_member_index < 0) return ReadRegularFile(sample.path, bytes, max_bytes);
  if (!tar_ || tar_->path != sample.path || tar_->next_index > sample.tar_member_index) {
    MM_ASSIGN_OR_RETURN(ArchiveReadPtr a, OpenTar(sample.path));
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
  if (max_bytes >= 0 && archive_entry_size_is_set(entry) != 0 &&
      archive_entry_size(entry) > max_bytes) {
    bytes->clear();
    return Status::OutOfRange("tar member " + sample.tar_member + " is " +
                              std::to_string(archive_entry_size(entry)) + " bytes, over the " +
                              std::to_string(max_bytes) + " bytes read of one file");
  }
  Status st = ReadMemberData(tar_->archive.get(), bytes);
  if (!st.ok() && st.code() != StatusCode::kUnsupported) tar_.reset();  // damaged: reopen
  return st;
}

}  // namespace mm::pack

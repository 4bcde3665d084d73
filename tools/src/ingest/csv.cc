// csv.cc: CSV and TSV manifests, a header row and then rows (ingest.h, "csv" and "tsv").
#include <algorithm>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

#include "ingest/common.h"
#include "ingest/formats.h"
#include "ingest/keys.h"
#include "mm/internal/file.h"
#include "text/ascii.h"

namespace mm::pack {

namespace fs = std::filesystem;

namespace {

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

}  // namespace

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

}  // namespace mm::pack

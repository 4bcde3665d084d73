// csv.cc: CSV and TSV manifests, a header row and then rows (ingest.h, "csv" and "tsv").
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "ingest/common.h"
#include "ingest/fields.h"
#include "ingest/formats.h"
#include "ingest/keys.h"
#include "mm/internal/file.h"

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
class DelimitedParser {
 public:
  DelimitedParser(const std::string& text, char sep, bool quoting, std::vector<BadRecord>* bad)
      : text_(text), n_(text.size()), sep_(sep), quoting_(quoting), bad_(bad) {}

  // Every row (blank lines skipped) and the line each starts on (1-based).
  void Parse(std::vector<std::vector<std::string>>* rows, std::vector<int64_t>* row_lines) {
    rows_ = rows;
    row_lines_ = row_lines;
    for (;;) {
      if (i_ >= n_) {
        if (!quoted_) break;
        Restart("a quoted field is never closed");  // resumes on the record's second line
        continue;
      }
      if (quoted_) {
        QuotedChar(text_[i_]);
      } else {
        UnquotedChar(text_[i_]);
      }
    }
    if (!field_.empty() || !row_.empty() || field_started_) EndRow();
  }

 private:
  bool CrLfAt(size_t i) const { return text_[i] == '\r' && i + 1 < n_ && text_[i + 1] == '\n'; }

  void QuotedChar(char c) {
    if (c == '"') {
      if (i_ + 1 < n_ && text_[i_ + 1] == '"') {
        field_.push_back('"');
        i_ += 2;
        return;
      }
      quoted_ = false;
      after_quote_ = true;
      ++i_;
      return;
    }
    if (c == '\n') ++line_;
    field_.push_back(c);
    ++i_;
  }

  void UnquotedChar(char c) {
    if (after_quote_ && c != sep_ && c != '\n' && !CrLfAt(i_)) {
      Restart("text after the closing quote of a field (a stray or unescaped quote?)");
      return;
    }
    if (c == '"' && !field_started_ && quoting_) {
      quoted_ = true;
      field_started_ = true;
    } else if (c == sep_) {
      EndField();
    } else if (c == '\n') {
      EndRow();
      ++line_;
      row_line_ = line_;
      row_start_ = i_ + 1;
    } else if (!CrLfAt(i_)) {
      field_.push_back(c);
      field_started_ = true;
    }
    ++i_;
  }

  void EndField() {
    row_.push_back(std::move(field_));
    field_.clear();
    field_started_ = false;
    after_quote_ = false;
  }

  void EndRow() {
    EndField();
    const bool blank = row_.size() == 1 && row_[0].empty();
    if (!blank) {
      rows_->push_back(std::move(row_));
      row_lines_->push_back(row_line_);
    }
    row_.clear();
  }

  // Drops the record begun at row_start_ and resumes on the line after its first line.
  void Restart(const char* why) {
    bad_->push_back({row_line_, why});
    row_.clear();
    field_.clear();
    quoted_ = field_started_ = after_quote_ = false;
    const size_t nl = text_.find('\n', row_start_);
    i_ = nl == std::string::npos ? n_ : nl + 1;
    line_ = row_line_ + 1;
    row_line_ = line_;
    row_start_ = i_;
  }

  const std::string& text_;
  const size_t n_;
  const char sep_;
  const bool quoting_;
  std::vector<BadRecord>* bad_;
  std::vector<std::vector<std::string>>* rows_ = nullptr;
  std::vector<int64_t>* row_lines_ = nullptr;
  std::vector<std::string> row_;
  std::string field_;
  bool quoted_ = false, field_started_ = false, after_quote_ = false;
  int64_t line_ = 1, row_line_ = 1;
  size_t i_ = 0, row_start_ = 0;
};

void ParseDelimited(const std::string& text, char sep, bool quoting,
                    std::vector<std::vector<std::string>>* rows, std::vector<int64_t>* row_lines,
                    std::vector<BadRecord>* bad) {
  DelimitedParser(text, sep, quoting, bad).Parse(rows, row_lines);
}

// The rows after the header into samples (columns `cols`), and issues for the malformed
// records, short rows and URLs.
void AddRows(const fs::path& file, const std::vector<std::vector<std::string>>& rows,
             const std::vector<int64_t>& lines, const std::vector<BadRecord>& bad,
             const ColumnPlan& cols, IngestResult* result) {
  Grouper grouper(file.parent_path());
  const std::string where = file.filename().string();
  for (const BadRecord& b : bad) {
    result->issues.push_back({where + ":" + std::to_string(b.line), "", "invalid_manifest_line",
                              "malformed row: " + b.why +
                                  "; the row is skipped and reading "
                                  "goes on at the next line"});
  }
  int needed = cols.image;
  for (int c : cols.captions) needed = std::max(needed, c);
  for (size_t r = 1; r < rows.size(); ++r) {
    const auto& row = rows[r];
    std::string source = where + ":" + std::to_string(lines[r]);
    if (static_cast<int>(row.size()) <= needed || row[cols.image].empty()) {
      result->issues.push_back({source, "", "invalid_manifest_line",
                                "row has " + std::to_string(row.size()) + " fields"});
      continue;
    }
    if (IsRemoteUrl(row[cols.image])) {
      result->issues.push_back(
          {source, "", "remote_image_not_supported",
           "image '" + row[cols.image] + "' is a URL; mmpack reads local files (download first)"});
      continue;
    }
    // Every non-empty caption cell; an all-empty row keeps its first (reported as empty).
    std::vector<std::string> captions;
    for (int c : cols.captions) {
      if (!row[c].empty()) captions.push_back(row[c]);
    }
    if (captions.empty()) captions.push_back(row[cols.captions[0]]);
    std::vector<FieldValue> fields;
    for (int c : cols.extra) {
      fields.push_back(c >= 0 && c < static_cast<int>(row.size()) ? FieldValue::FromText(row[c])
                                                                  : FieldValue());
    }
    grouper.Add(row[cols.image], std::move(captions), std::move(fields));
  }
  result->samples = grouper.Take();
}

}  // namespace

Result<IngestResult> IngestDelimited(const fs::path& file, char sep, InputFormat format,
                                     const FieldNames& names) {
  std::string text;
  MM_RETURN_NOT_OK(ReadRegularFile(file.string(), &text));
  StripBom(&text);
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
  std::vector<std::vector<std::string>> rows;
  std::vector<int64_t> lines;
  std::vector<BadRecord> bad;
  ParseDelimited(text, sep, /*quoting=*/sep != '\t', &rows, &lines, &bad);
  if (!bad.empty() && bad[0].line == 1) {
    return Status::InvalidArgument(file.string() + ": malformed header row: " + bad[0].why);
  }
  if (rows.empty()) return Status::InvalidArgument(file.string() + ": no header row");
  const FieldPlan plan(names);
  const ColumnPlan cols = PlanColumns(rows[0], plan);
  if (cols.image < 0 || cols.captions.empty()) {
    return Status::InvalidArgument(file.string() + ": header needs an image column (" +
                                   FieldPlan::List(plan.image) + ") and a text column (" +
                                   FieldPlan::List(plan.caption) + "); its first line is '" +
                                   first_line.substr(0, 200) + "'");
  }
  AddRows(file, rows, lines, bad, cols, &result);
  return result;
}

}  // namespace mm::pack

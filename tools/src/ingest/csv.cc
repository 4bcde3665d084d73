// csv.cc: CSV and TSV manifests, a header row and then rows (ingest.h, "csv" and "tsv").
#include <algorithm>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ingest/common.h"
#include "ingest/fields.h"
#include "ingest/formats.h"
#include "ingest/image_url.h"
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
  // Called with each row (blank lines skipped), the line it starts on (1-based) and the offset
  // in the text before which nothing will be read again; false stops the parse.
  using RowFn = std::function<bool(std::vector<std::string>&& row, int64_t line, size_t done)>;

  DelimitedParser(std::string_view text, char sep, bool quoting, std::vector<BadRecord>* bad)
      : text_(text), n_(text.size()), sep_(sep), quoting_(quoting), bad_(bad) {}

  void Parse(const RowFn& on_row) {
    on_row_ = &on_row;
    for (;;) {
      if (stopped_) return;
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
    if (!blank && !(*on_row_)(std::move(row_), row_line_, row_start_)) stopped_ = true;
    row_.clear();
  }

  // Drops the record begun at row_start_ and resumes on the line after its first line.
  void Restart(const char* why) {
    bad_->push_back({row_line_, why});
    row_.clear();
    field_.clear();
    quoted_ = field_started_ = after_quote_ = false;
    const size_t nl = text_.find('\n', row_start_);
    i_ = nl == std::string_view::npos ? n_ : nl + 1;
    line_ = row_line_ + 1;
    row_line_ = line_;
    row_start_ = i_;
  }

  const std::string_view text_;
  const size_t n_;
  const char sep_;
  const bool quoting_;
  std::vector<BadRecord>* bad_;
  const RowFn* on_row_ = nullptr;
  bool stopped_ = false;
  std::vector<std::string> row_;
  std::string field_;
  bool quoted_ = false, field_started_ = false, after_quote_ = false;
  int64_t line_ = 1, row_line_ = 1;
  size_t i_ = 0, row_start_ = 0;
};

}  // namespace

Result<IngestResult> IngestDelimited(const ManifestFile& manifest, InputFormat format,
                                     const FieldNames& names, const fs::path& spill_dir) {
  char sep = format == InputFormat::kTsv ? '\t' : ',';
  MappedText mapped;
  MM_RETURN_NOT_OK(mapped.Open(manifest.display, manifest.fd.get()));
  std::string_view text = mapped.text();
  if (text.size() >= 3 && text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  IngestResult result;
  result.format = format;
  // A ".csv" whose header has no comma but a semicolon is ';'-separated (as spreadsheets in
  // many locales save "CSV").
  const std::string first_line(text.substr(0, text.find('\n')));
  if (sep == ',' && first_line.find(',') == std::string::npos &&
      first_line.find(';') != std::string::npos) {
    sep = ';';
    result.notes.push_back(manifest.name +
                           ": read as ';'-separated (the header has "
                           "no comma)");
  }
  const FieldPlan plan(names);
  const std::string& where = manifest.name;
  Grouper grouper(manifest.base, spill_dir, names.max_caption_bytes);
  std::vector<BadRecord> bad;
  std::vector<IngestIssue> row_issues;  // after the malformed records', as they were reported
  std::optional<ColumnPlan> cols;       // from the header row
  int needed = 0;
  Status st;
  DelimitedParser(text, sep, /*quoting=*/sep != '\t', &bad)
      .Parse([&](std::vector<std::string>&& row, int64_t line, size_t done) {
        mapped.DoneBefore(done);
        if (!cols) {
          if (!bad.empty() && bad[0].line == 1) {
            st =
                Status::InvalidArgument(manifest.display + ": malformed header row: " + bad[0].why);
            return false;
          }
          cols = PlanColumns(row, plan);
          if (cols->image < 0 || cols->captions.empty()) {
            st = Status::InvalidArgument(manifest.display + ": header needs an image column (" +
                                         FieldPlan::List(plan.image) + ") and a text column (" +
                                         FieldPlan::List(plan.caption) + "); its first line is '" +
                                         first_line.substr(0, 200) + "'");
            return false;
          }
          needed = cols->image;
          for (int c : cols->captions) needed = std::max(needed, c);
          return true;
        }
        std::string source = where + ":" + std::to_string(line);
        if (static_cast<int>(row.size()) <= needed || row[cols->image].empty()) {
          row_issues.push_back({source, "", "invalid_manifest_line",
                                "row has " + std::to_string(row.size()) + " fields"});
          return true;
        }
        if (ResolvedImage r = ResolveImagePath(manifest.base, row[cols->image]); r.reason) {
          row_issues.push_back({source, "", r.reason, std::move(r.detail)});
          return true;
        }
        // Every non-empty caption cell; an all-empty row keeps its first (reported as empty).
        std::vector<std::string> captions;
        for (int c : cols->captions) {
          if (!row[c].empty()) captions.push_back(row[c]);
        }
        if (captions.empty()) captions.push_back(row[cols->captions[0]]);
        std::vector<FieldValue> fields;
        for (int c : cols->extra) {
          fields.push_back(c >= 0 && c < static_cast<int>(row.size()) ? FieldValue::FromText(row[c])
                                                                      : FieldValue());
        }
        st = grouper.Add(row[cols->image], std::move(captions), std::move(fields));
        return st.ok();
      });
  MM_RETURN_NOT_OK(st);
  if (!cols) {
    if (!bad.empty() && bad[0].line == 1) {
      return Status::InvalidArgument(manifest.display + ": malformed header row: " + bad[0].why);
    }
    return Status::InvalidArgument(manifest.display + ": no header row");
  }
  for (const BadRecord& b : bad) {
    result.issues.push_back({where + ":" + std::to_string(b.line), "", "invalid_manifest_line",
                             "malformed row: " + b.why +
                                 "; the row is skipped and reading "
                                 "goes on at the next line"});
  }
  for (IngestIssue& i : row_issues) result.issues.push_back(std::move(i));
  MM_ASSIGN_OR_RETURN(result.list, grouper.Take());
  return result;
}

}  // namespace mm::pack

// report_stream.cc: see report_stream.h.
#include "set/report_stream.h"

#include <cerrno>
#include <fstream>
#include <optional>
#include <utility>
#include <vector>

#include "mm/internal/file.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;
using DomParser = nlohmann::detail::json_sax_dom_parser<ojson>;

bool IsList(const std::string& key) {
  for (const char* list : kReportLists) {
    if (key == list) return true;
  }
  return false;
}

// The SAX events of one report, with the depth of open containers tracked (the report object
// itself is depth 1, its members' values start at depth 1). Two uses:
//   summary: every event forwarded to a DOM parser of `root`, except the values of the
//            members kReportLists names (a null placeholder is forwarded instead);
//   entries: only the elements of the array member `list`, each into its own DOM, handed to
//            `fn` when complete.
class ReportSax {
 public:
  using string_t = ojson::string_t;

  // Summary.
  explicit ReportSax(ojson* root) : dom_(std::in_place, *root, false) {}
  // Entries.
  ReportSax(std::string list, const std::function<Status(ojson&&)>* fn)
      : list_(std::move(list)), fn_(fn) {}

  bool null() {
    return Value([](DomParser& d) { return d.null(); }, [] { return ojson(); });
  }
  bool boolean(bool v) {
    return Value([v](DomParser& d) { return d.boolean(v); }, [v] { return ojson(v); });
  }
  bool number_integer(ojson::number_integer_t v) {
    return Value([v](DomParser& d) { return d.number_integer(v); }, [v] { return ojson(v); });
  }
  bool number_unsigned(ojson::number_unsigned_t v) {
    return Value([v](DomParser& d) { return d.number_unsigned(v); }, [v] { return ojson(v); });
  }
  bool number_float(ojson::number_float_t v, const string_t& s) {
    return Value([&](DomParser& d) { return d.number_float(v, s); }, [v] { return ojson(v); });
  }
  bool string(string_t& v) {
    return Value([&](DomParser& d) { return d.string(v); }, [&] { return ojson(v); });
  }
  bool binary(ojson::binary_t& v) {  // never in JSON text
    return Value([&](DomParser& d) { return d.binary(v); }, [] { return ojson(); });
  }
  bool start_object(std::size_t n) {
    return Open(false, [n](DomParser& d) { return d.start_object(n); });
  }
  bool start_array(std::size_t n) {
    return Open(true, [n](DomParser& d) { return d.start_array(n); });
  }
  bool end_object() {
    return Close([](DomParser& d) { return d.end_object(); });
  }
  bool end_array() {
    return Close([](DomParser& d) { return d.end_array(); });
  }
  bool key(string_t& k) {
    if (depth_ == 1) {  // a member of the report
      member_ = k;
      if (summary() && IsList(k)) {  // its place kept, its value skipped
        dom_->key(k);
        dom_->null();
        skip_from_ = 1;
        return true;
      }
    }
    if (skipping()) return true;
    if (summary()) return dom_->key(k);
    return entry_ ? entry_->key(k) : true;
  }
  bool parse_error(std::size_t at, const std::string&, const nlohmann::detail::exception& e) {
    error_ = Status::Corruption("not JSON at byte " + std::to_string(at) + " (" + e.what() + ")");
    return false;
  }

  const Status& error() const { return error_; }
  bool saw_object() const { return saw_object_; }

 private:
  bool summary() const { return dom_.has_value(); }
  bool skipping() const { return skip_from_ > 0; }
  // Inside the list `list_` (entries): its elements are at depth 2.
  bool in_list() const { return !summary() && depth_ >= 2 && list_open_; }

  template <typename F, typename G>
  bool Value(F forward, G scalar) {
    if (depth_ == 0) return true;  // a report that is no object: saw_object() says so
    if (skipping()) {
      if (depth_ == skip_from_) skip_from_ = 0;  // the skipped member was this scalar
      return true;
    }
    if (summary()) return forward(*dom_);
    if (entry_) return forward(*entry_);
    if (in_list() && depth_ == 2) return Deliver(scalar());  // a scalar element
    return true;
  }

  template <typename F>
  bool Open(bool array, F forward) {
    if (depth_ == 0) saw_object_ = !array;
    ++depth_;
    if (depth_ == 1) return summary() ? forward(*dom_) : true;  // the report itself
    if (skipping()) return true;
    if (summary()) return forward(*dom_);
    if (depth_ == 2 && array && member_ == list_ && !list_open_) {  // the list itself
      list_open_ = true;
      return true;
    }
    if (in_list() && depth_ == 3 && !entry_) {  // an element starts
      element_ = ojson();
      entry_.emplace(element_, false);
    }
    return entry_ ? forward(*entry_) : true;
  }

  template <typename F>
  bool Close(F forward) {
    const int depth = depth_--;
    if (skipping()) {
      if (depth_ == skip_from_) skip_from_ = 0;  // the skipped member ends here
      return true;
    }
    if (summary()) return forward(*dom_);
    if (depth == 2 && list_open_) {  // the list ends
      list_open_ = false;
      member_.clear();
      return true;
    }
    if (!entry_) return true;
    if (!forward(*entry_)) return false;
    if (depth == 3) {  // the element is complete
      entry_.reset();
      return Deliver(std::move(element_));
    }
    return true;
  }

  bool Deliver(ojson&& element) {
    Status st = (*fn_)(std::move(element));
    if (!st.ok()) {
      error_ = std::move(st);
      return false;
    }
    return true;
  }

  std::optional<DomParser> dom_;  // summary
  std::string list_;              // entries: the member whose elements are handed out
  const std::function<Status(ojson&&)>* fn_ = nullptr;
  std::optional<DomParser> entry_;  // entries: the element being read
  ojson element_;
  bool list_open_ = false;
  int depth_ = 0;
  int skip_from_ = 0;   // > 0: skipping the value of a member at this depth
  std::string member_;  // the report's member being read
  bool saw_object_ = false;
  Status error_;
};

Status Parse(const fs::path& path, ReportSax* sax) {
  // A stream (its buffer read a character at a time without a lock, unlike fgetc) over a plain
  // read of the file: a mapping would count the whole report as resident.
  std::vector<char> buffer(size_t{1} << 20);
  std::ifstream in;
  in.rdbuf()->pubsetbuf(buffer.data(), static_cast<std::streamsize>(buffer.size()));
  in.open(path, std::ios::binary);
  if (!in) return ErrnoStatus(errno, "cannot read " + path.string());
  const bool ok = ojson::sax_parse(in, sax);
  if (!sax->error().ok()) {
    if (sax->error().code() == StatusCode::kCorruption) {
      return Status::Corruption(path.string() + " is not a report: " + sax->error().message());
    }
    return sax->error();
  }
  if (in.bad()) return Status::IOError("cannot read " + path.string());
  if (!ok || !sax->saw_object()) {
    return Status::Corruption(path.string() + " is not a report: not a JSON object");
  }
  return Status::OK();
}

}  // namespace

Result<ojson> ReadReportSummary(const fs::path& path) {
  ojson root;
  ReportSax sax(&root);
  MM_RETURN_NOT_OK(Parse(path, &sax));
  if (!root.is_object()) {
    return Status::Corruption(path.string() + " is not a report: not a JSON object");
  }
  return root;
}

Status ForEachReportEntry(const fs::path& path, const std::string& list,
                          const std::function<Status(ojson&&)>& fn) {
  ReportSax sax(list, &fn);
  return Parse(path, &sax);
}

}  // namespace mm::pack

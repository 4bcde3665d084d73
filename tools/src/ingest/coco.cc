// coco.cc: the COCO captions JSON, images[] and annotations[] (ingest.h, "coco").
//
// Read without holding the file or its samples: the file is mapped and parsed with
// nlohmann's SAX interface, one element of images[] or annotations[] at a time (each element as
// a small DOM, so the rules below read as they did on the whole document); images and captions
// meet through external sorts (spill.h), since annotations may come before images and name them
// in any order. Rules, unchanged from the whole-document reader:
//   - an image without id / string file_name, or an annotation without image_id / string
//     caption, is an invalid_manifest_line issue;
//   - a file_name that no UTF-8 string can hold is an invalid_utf8 issue, and its annotations go
//     with it, unreported;
//   - a repeated image id is a duplicate_key issue (the first keeps it);
//   - ids with the same file_name are one sample (the first's place), holding the captions of
//     all, in annotation order;
//   - an annotation for no image is an issue;
//   - keys by AssignKeysByStem's rule over every sample; a sample without caption is then a
//     missing_caption issue.
// Issues come in that order: images', annotations', captionless samples' (each in input order).
#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "ingest/common.h"
#include "ingest/formats.h"
#include "ingest/keys.h"
#include "ingest/lenient_json.h"
#include "mm/internal/file.h"

namespace mm::pack {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// An iterator over the mapped text that remembers how far the parser has read, so that the
// pages behind it are given back as it goes (MappedText::DoneBefore).
struct TrackedIterator {
  using iterator_category = std::forward_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;
  const char* p = nullptr;
  const char** seen = nullptr;
  reference operator*() const { return *p; }
  TrackedIterator& operator++() {
    *seen = ++p;
    return *this;
  }
  TrackedIterator operator++(int) {
    TrackedIterator old = *this;
    ++*this;
    return old;
  }
  bool operator==(const TrackedIterator& o) const { return p == o.p; }
  bool operator!=(const TrackedIterator& o) const { return p != o.p; }
};

// SAX events of the whole document, with each element of the top-level arrays "images" and
// "annotations" built as a DOM and handed to `on_element(array, index, element)`.
class CocoSax : public nlohmann::json_sax<json> {
 public:
  enum Array { kNone, kImages, kAnnotations };
  using OnElement = std::function<bool(Array, uint64_t, json&&)>;
  explicit CocoSax(OnElement on_element) : on_element_(std::move(on_element)) {}

  bool null() override { return Value(nullptr); }
  bool boolean(bool v) override { return Value(v); }
  bool number_integer(number_integer_t v) override { return Value(v); }
  bool number_unsigned(number_unsigned_t v) override { return Value(v); }
  bool number_float(number_float_t v, const string_t&) override { return Value(v); }
  bool string(string_t& v) override { return Value(std::move(v)); }
  bool binary(binary_t& v) override { return Value(json::binary(std::move(v))); }
  bool start_object(std::size_t) override { return Open(json::object()); }
  bool start_array(std::size_t) override { return Open(json::array()); }
  bool end_object() override { return Close(); }
  bool end_array() override { return Close(); }
  bool key(string_t& k) override {
    if (depth_ == 1) {
      // A repeated "images" or "annotations" (RFC 8259 leaves which one counts open; a DOM
      // keeps the last, a stream has read the first): refused rather than guessed.
      if (k == "images" || k == "annotations") {
        bool& seen = k == "images" ? images_key_ : annotations_key_;
        if (seen) {
          repeated_ = k;
          return false;
        }
        seen = true;
      }
      top_key_ = k;
    }
    if (!stack_.empty()) key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    error_ = e.what();
    return false;
  }

  bool saw_images = false, saw_annotations = false, not_object = false;
  std::string error_, repeated_;

 private:
  // A value where the document is: the root (must be an object), a top-level member, an
  // element of one of the two arrays, or inside an element being built.
  bool Value(json v) {
    if (depth_ == 0) {
      not_object = true;
      return false;
    }
    if (!stack_.empty()) return Put(std::move(v));
    if (depth_ == 2 && array_ != kNone) return on_element_(array_, next_++, std::move(v));
    return true;  // another top-level member's scalar, or inside one: skipped
  }
  bool Open(json v) {
    if (depth_ == 0 && !v.is_object()) {
      not_object = true;
      return false;
    }
    ++depth_;
    if (depth_ == 2 && v.is_array() && (top_key_ == "images" || top_key_ == "annotations")) {
      array_ = top_key_ == "images" ? kImages : kAnnotations;
      (array_ == kImages ? saw_images : saw_annotations) = true;
      next_ = 0;
      return true;
    }
    if (!stack_.empty()) {
      json* parent = stack_.back();
      json* child;
      if (parent->is_object()) {
        child = &(*parent)[key_];
      } else {
        parent->push_back(nullptr);
        child = &parent->back();
      }
      *child = std::move(v);
      stack_.push_back(child);
      return true;
    }
    if (depth_ == 3 && array_ != kNone) {  // an element begins
      element_ = std::move(v);
      stack_.push_back(&element_);
    }
    return true;
  }
  bool Close() {
    --depth_;
    if (!stack_.empty()) {
      stack_.pop_back();
      if (stack_.empty()) return on_element_(array_, next_++, std::move(element_));
      return true;
    }
    if (depth_ == 1) array_ = kNone;
    return true;
  }
  bool Put(json v) {
    json* top = stack_.back();
    if (top->is_object()) {
      (*top)[key_] = std::move(v);
    } else {
      top->push_back(std::move(v));
    }
    return true;
  }

  OnElement on_element_;
  bool images_key_ = false, annotations_key_ = false;  // seen at the top level
  int depth_ = 0;
  std::string top_key_, key_;
  Array array_ = kNone;
  uint64_t next_ = 0;
  json element_;
  std::vector<json*> stack_;
};

// Whether a COCO element is an object with `id` (any value) and the string `text`: an image's
// id and file_name, an annotation's image_id and caption.
bool HasFields(const json& e, const char* id, const char* text) {
  return e.is_object() && e.contains(id) && e.contains(text) && e[text].is_string();
}

// The document's text, neutralized (lenient_json.h) into an unnamed file in `spill_dir` when
// it holds text no UTF-8 string can (rare), else the file itself: mapped either way.
Status MapNeutral(const fs::path& file, const fs::path& spill_dir, MappedText* original,
                  MappedText* rewritten, MappedText** active, NeutralJson* neutral) {
  MM_RETURN_NOT_OK(original->Open(file));
  *active = original;
  UniqueFd out;
  Status written;
  std::string buffer;  // pieces gathered into writes of about 1 MiB
  const std::string what = "cannot write " + (spill_dir / "").string();
  auto flush = [&]() {
    if (!written.ok() || buffer.empty()) return;
    if (!out.valid()) {
      auto fd = OpenSpillFile(spill_dir);
      if (!fd.ok()) {
        written = fd.status();
        return;
      }
      out = std::move(*fd);
    }
    written = WriteAll(out.get(), buffer.data(), buffer.size(), what);
    buffer.clear();
  };
  *neutral = NeutralizeJsonTo(original->text(), [&](std::string_view piece) {
    buffer.append(piece);
    if (buffer.size() >= (size_t{1} << 20)) flush();
  });
  flush();
  MM_RETURN_NOT_OK(written);
  if (neutral->changed) {
    MM_RETURN_NOT_OK(rewritten->Open(file, out.get()));
    *active = rewritten;
  }
  return Status::OK();
}

// What the joins of one COCO file share: where spills go, the sorters' memory, the file's name
// for issue sources, and the issues with their places (put in order at the end).
struct CocoJoin {
  fs::path spill_dir;
  size_t memory = 0;
  std::string where;  // the file's name, as issue sources name it
  std::vector<std::pair<uint64_t, IngestIssue>> image_issues, annotation_issues;
};

// The elements read from the document, sorted by id.
struct CocoElements {
  CocoElements(const fs::path& spill_dir, size_t memory)
      : images(spill_dir, memory), unstorable(spill_dir, memory), annotations(spill_dir, memory) {}
  ExternalSorter images;       // (id, i) -> file_name
  ExternalSorter unstorable;   // (id, i)
  ExternalSorter annotations;  // (image_id, j) -> caption
};

// Parse: images[] and annotations[] one element at a time into `out`; malformed elements are
// issues. Errors: InvalidArgument (not JSON, not an object, a repeated or missing array).
Status ReadElements(const fs::path& file, MappedText* mapped, const NeutralJson& neutral,
                    CocoJoin* join, CocoElements* out) {
  const std::string_view text = mapped->text();
  const char* read_to = text.data();
  const std::string& where = join->where;
  Status st;
  CocoSax sax([&](CocoSax::Array array, uint64_t n, json&& e) {
    mapped->DoneBefore(static_cast<size_t>(read_to - text.data()));
    if (array == CocoSax::kImages) {
      std::string source = where + ":images[" + std::to_string(n) + "]";
      if (!HasFields(e, "id", "file_name")) {
        join->image_issues.push_back(
            {n, {source, "", "invalid_manifest_line", "image without id/file_name"}});
        return true;
      }
      const std::string& file_name = e["file_name"].get_ref<const std::string&>();
      if (neutral.changed && file_name.find(neutral.mark) != std::string::npos) {
        join->image_issues.push_back({n,
                                      {source, "", "invalid_utf8",
                                       "file_name is not valid UTF-8 (an invalid byte or a lone "
                                       "surrogate escape)"}});
        st = out->unstorable.Add(TextKey(e["id"].dump(), n), {});
        return st.ok();
      }
      st = out->images.Add(TextKey(e["id"].dump(), n), file_name);
      return st.ok();
    }
    std::string source = where + ":annotations[" + std::to_string(n) + "]";
    if (!HasFields(e, "image_id", "caption")) {
      join->annotation_issues.push_back(
          {n, {source, "", "invalid_manifest_line", "annotation without image_id/caption"}});
      return true;
    }
    std::string caption = e["caption"].get<std::string>();
    if (neutral.changed) RestoreInvalid(&caption, neutral.mark);
    st = out->annotations.Add(TextKey(e["image_id"].dump(), n), caption);
    return st.ok();
  });
  const bool parsed = json::sax_parse(TrackedIterator{text.data(), &read_to},
                                      TrackedIterator{text.data() + text.size(), &read_to}, &sax);
  MM_RETURN_NOT_OK(st);
  if (sax.not_object) return Status::InvalidArgument(file.string() + ": not a JSON object");
  if (!sax.repeated_.empty()) {
    return Status::InvalidArgument(file.string() + ": the key '" + sax.repeated_ +
                                   "' appears twice at the top level; a COCO captions JSON has "
                                   "one 'images' and one 'annotations' array");
  }
  if (!parsed) {
    return Status::InvalidArgument(file.string() + ": not valid JSON: " + sax.error_);
  }
  if (!sax.saw_images || !sax.saw_annotations) {
    return Status::InvalidArgument(file.string() +
                                   ": COCO captions JSON needs arrays 'images' and 'annotations'");
  }
  MM_RETURN_NOT_OK(out->images.Finish());
  MM_RETURN_NOT_OK(out->unstorable.Finish());
  return out->annotations.Finish();
}

// Join 1: each id's first image keeps it (later ones are duplicate_key issues); the kept ones
// into `by_file` by (file_name, i) -> id, so that ids of one file meet.
Status KeepFirstImageOfEachId(ExternalSorter* images, CocoJoin* join, ExternalSorter* by_file) {
  std::string key, file_name, last_id;
  bool first = true;
  for (;;) {
    MM_ASSIGN_OR_RETURN(bool more, images->Next(&key, &file_name));
    if (!more) break;
    const std::string id(TextOf(key));
    const uint64_t i = NumberOf(key);
    if (!first && id == last_id) {
      join->image_issues.push_back({i,
                                    {join->where + ":images[" + std::to_string(i) + "]", "",
                                     "duplicate_key", "image id " + id + " repeated"}});
      continue;
    }
    MM_RETURN_NOT_OK(by_file->Add(TextKey(file_name, i), id));
    last_id = id;
    first = false;
  }
  return by_file->Finish();
}

// Join 2: each file is a sample at its first image's place: `samples` (place -> file_name)
// and each id's sample, `id_sample` ((id, 0) -> place).
Status SamplesOfFiles(ExternalSorter* by_file, ExternalSorter* samples, ExternalSorter* id_sample) {
  std::string key, id, file_name;
  uint64_t place = 0;
  bool open = false;
  for (;;) {
    MM_ASSIGN_OR_RETURN(bool more, by_file->Next(&key, &id));
    if (!more) break;
    const std::string name = TextOf(key);
    if (!open || name != file_name) {
      file_name.assign(name);
      place = NumberOf(key);
      open = true;
      MM_RETURN_NOT_OK(samples->Add(Be64(place), file_name));
    }
    MM_RETURN_NOT_OK(id_sample->Add(TextKey(id, 0), Be64(place)));
  }
  MM_RETURN_NOT_OK(samples->Finish());
  return id_sample->Finish();
}

// Join 3: the annotations joined with the ids (all three sorted by id) into `captions`
// ((place, j) -> caption); an annotation for no image is an issue, one for an image whose
// file_name was unstorable goes with it, unreported.
Status CaptionsOfSamples(CocoElements* elements, ExternalSorter* id_sample, CocoJoin* join,
                         ExternalSorter* captions) {
  std::string ann_key, caption, id_key, place, un_key, unused;
  MM_ASSIGN_OR_RETURN(bool have_id, id_sample->Next(&id_key, &place));
  MM_ASSIGN_OR_RETURN(bool have_un, elements->unstorable.Next(&un_key, &unused));
  for (;;) {
    MM_ASSIGN_OR_RETURN(bool more, elements->annotations.Next(&ann_key, &caption));
    if (!more) break;
    const std::string id = TextOf(ann_key);
    const std::string_view order = TextOrderOf(ann_key);
    while (have_id && TextOrderOf(id_key) < order) {
      MM_ASSIGN_OR_RETURN(have_id, id_sample->Next(&id_key, &place));
    }
    while (have_un && TextOrderOf(un_key) < order) {
      MM_ASSIGN_OR_RETURN(have_un, elements->unstorable.Next(&un_key, &unused));
    }
    const uint64_t j = NumberOf(ann_key);
    if (have_id && TextOrderOf(id_key) == order) {
      MM_RETURN_NOT_OK(captions->Add(place + Be64(j), caption));
    } else if (!(have_un && TextOrderOf(un_key) == order)) {
      join->annotation_issues.push_back(
          {j,
           {join->where + ":annotations[" + std::to_string(j) + "]", "", "invalid_manifest_line",
            "annotation for unknown image_id " + std::string(id)}});
    }
  }
  return captions->Finish();
}

// Join 4: the samples in place order with their captions in annotation order, each image
// path resolved beside the file (or in its images/ folder), into `all`.
Status CaptionedSamples(const fs::path& base, ExternalSorter* samples, ExternalSorter* captions,
                        SampleList* all) {
  std::string place, file_name, cap_key, caption;
  MM_ASSIGN_OR_RETURN(bool have_cap, captions->Next(&cap_key, &caption));
  for (;;) {
    MM_ASSIGN_OR_RETURN(bool more, samples->Next(&place, &file_name));
    if (!more) break;
    RawSample s;
    s.source = file_name;
    s.path = Resolve(base, s.source);
    std::error_code ec;
    if (!fs::exists(s.path, ec)) {
      std::string alt = Resolve(base / "images", s.source);
      if (fs::exists(alt, ec)) s.path = alt;
    }
    while (have_cap && cap_key.compare(0, 8, place) == 0) {
      s.captions.push_back(std::move(caption));
      MM_ASSIGN_OR_RETURN(have_cap, captions->Next(&cap_key, &caption));
    }
    MM_RETURN_NOT_OK(all->Add(s));
  }
  return all->Finish();
}

// Join 5: keys by AssignKeys' rule over every sample (captioned or not), then the issues in
// order (images', annotations', captionless samples') and the captioned samples into `result`.
Status KeyedResult(std::unique_ptr<SampleList> all, CocoJoin* join, IngestResult* result) {
  MM_RETURN_NOT_OK(AssignKeysByStem(&all));
  std::sort(join->image_issues.begin(), join->image_issues.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::sort(join->annotation_issues.begin(), join->annotation_issues.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto* issues : {&join->image_issues, &join->annotation_issues}) {
    for (auto& [n, issue] : *issues) result->issues.push_back(std::move(issue));
  }
  MM_ASSIGN_OR_RETURN(result->list, SampleList::Create(join->spill_dir));
  MM_RETURN_NOT_OK(ForEachSample(*all, [&](uint64_t, RawSample& s) -> Status {
    if (!s.captions.empty()) return result->list->Add(s);
    result->issues.push_back({s.source, s.key, "missing_caption", "no annotation"});
    return Status::OK();
  }));
  return result->list->Finish();
}

}  // namespace

Result<IngestResult> IngestCoco(const fs::path& file, const fs::path& spill_dir) {
  MappedText original, rewritten;
  MappedText* mapped = nullptr;
  NeutralJson neutral;
  MM_RETURN_NOT_OK(MapNeutral(file, spill_dir, &original, &rewritten, &mapped, &neutral));
  CocoJoin join{spill_dir, SortMemoryBytes(), file.filename().string(), {}, {}};
  CocoElements elements(spill_dir, join.memory);
  MM_RETURN_NOT_OK(ReadElements(file, mapped, neutral, &join, &elements));
  ExternalSorter by_file(spill_dir, join.memory);  // (file_name, i) -> id
  MM_RETURN_NOT_OK(KeepFirstImageOfEachId(&elements.images, &join, &by_file));
  ExternalSorter samples(spill_dir, join.memory);    // place -> file_name
  ExternalSorter id_sample(spill_dir, join.memory);  // (id, 0) -> place
  MM_RETURN_NOT_OK(SamplesOfFiles(&by_file, &samples, &id_sample));
  ExternalSorter captions(spill_dir, join.memory);  // (place, j) -> caption
  MM_RETURN_NOT_OK(CaptionsOfSamples(&elements, &id_sample, &join, &captions));
  MM_ASSIGN_OR_RETURN(std::unique_ptr<SampleList> all, SampleList::Create(spill_dir));
  MM_RETURN_NOT_OK(CaptionedSamples(file.parent_path(), &samples, &captions, all.get()));
  IngestResult result;
  result.format = InputFormat::kCoco;
  MM_RETURN_NOT_OK(KeyedResult(std::move(all), &join, &result));
  return result;
}

}  // namespace mm::pack

// ingest.h: enumerate the raw input of `mmpack build` into samples, in a deterministic order.
//
// Formats (schemas/FORMAT.md says what ends up in the shards):
//   files  a folder of pairs, searched recursively: `key.{jpg,jpeg,png,webp,gif,tif,tiff,bmp}`
//          beside `key.txt` (the img2dataset / WebDataset "files" layout). key = the path
//          relative to the folder without its extension. The whole .txt is one caption, with
//          one trailing newline ("\n" or "\r\n") and a UTF-8 byte-order mark removed. A .txt
//          (or a tar text member) over 16 MiB is an issue (file_too_large), not read.
//          Order: paths sorted bytewise. Symlinks are followed; a folder reached again (a
//          loop such as `a/up -> ..`, or a second link to it) is read once only (a note on
//          stderr). FIFOs, devices and links that do not resolve are not files.
//   jsonl  one JSON object a line: image from the first present of FieldNames::image (default
//          `image` | `image_path` | `file_name` | `filepath` | `url`), text from every present
//          field of FieldNames::caption (default: the first present of `text` | `caption` |
//          `title`; a JSON array of strings is several captions). Lines naming the same image
//          are that sample's captions, in line order; samples in order of first appearance. A
//          line that is not valid JSON or lacks the fields is reported (reason
//          `invalid_manifest_line`) and skipped. Which image paths and URLs a local manifest or
//          one at a URL may name: image_url.h (others are `remote_image_not_supported` or
//          `invalid_manifest_line`).
//   csv    a header row, then rows (RFC 4180 quoting, "," separated; ";" when the header has
//          ";" and no ","); the same field names as jsonl, matched without regard to ASCII case
//          and surrounding blanks. A malformed row (a quote never closed, text after a closing
//          quote) is reported as invalid_manifest_line and reading goes on at its next line.
//   tsv    tab separators, one record a line, no quoting (quotes are text).
//   coco   COCO captions JSON: `images[]` (`id`, `file_name`) and `annotations[]`
//          (`image_id`, `caption`). Samples in `images[]` order, captions in annotation order.
//          `file_name` resolves against the JSON's folder, else its `images/` subfolder.
//   wds    WebDataset tar files (one .tar, a folder of .tar files sorted by name, or a brace
//          list such as `shards-{00000..00099}.tar`, in its order; a tar it names that does not
//          exist is an issue, missing_file): members grouped by key (member path up to the first
//          dot of its base name); an image member (extensions above) plus text members whose
//          field ends in `txt`, `caption` or `text` (`.txt`, `.caption`, `.en.txt`...; several:
//          several captions, in member order). img2dataset's `.json` member (`url`,
//          `similarity`, `punsafe`, ...) holds the fields FieldNames::extra keeps, read as
//          jsonl's are; with FieldNames::caption given, the captions come from its fields as in
//          jsonl and the text members are not read. A sample whose .json member is not a JSON
//          object is an issue (invalid_manifest_line). Image bytes are not held here:
//          ImageReader streams them later.
//   imagefolder  a Hugging Face `imagefolder`: a folder with `metadata.jsonl` (or
//          `metadata.csv`) at its top level, whose `file_name` names each image relative to it:
//          read as that jsonl (or csv) manifest.
// Relative image paths resolve against the manifest's folder, or for a manifest at a URL (jsonl,
// csv, tsv; a remote folder's metadata.jsonl/.csv: IngestRemoteManifest) against its URL's
// folder (image_url.h); such images are read by ReadImageFile. JSON text that no UTF-8 string
// can hold (invalid bytes, lone surrogate escapes such as "\ud800") makes only the caption
// holding it invalid (reported as invalid_utf8 by the caption check), in JSONL and COCO. A
// sample whose image path (or tar member name) is not valid UTF-8 or holds a NUL cannot be
// stored (sources and keys are UTF-8): it is an issue (invalid_utf8 / invalid_manifest_line).
//
// Memory: IngestToList keeps the samples on disk (ingest/sample_list.h) and does every grouping
// and key rule through external sorts (ingest/spill.h), so its memory does not grow with the
// input's length, in every format: JSONL, CSV/TSV and COCO from a read-only mapping given back
// as it is read (JSONL line by line; COCO through nlohmann's SAX interface, one element of
// images[] or annotations[] at a time; a manifest at a URL from its copy in `spill_dir`),
// folders listed through a sort, tars one at a time. What remains in memory is bounded by one
// item: the longest manifest line or caption file, one tar's members, one folder's subfolders;
// and the issues (report.json's dropped entries). Image bytes are
// never held here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ingest/input_format.h"
#include "mm/status.h"

namespace mm::pack {

/// A manifest field's value kept with a sample (FieldNames::extra): JSON numbers and strings
/// as typed; a CSV/TSV cell is an integer or a float when all of it parses as one, else a
/// string; an empty cell, null or an absent key is missing; other JSON values are missing.
/// An integer in [2^63, 2^64) (64-bit hashes and ids) is kUint, exact.
struct FieldValue {
  // The order of mm::reader::MetadataValue::Type (mm/metadata.h), which the build casts to.
  enum class Type { kMissing, kInt, kFloat, kString, kUint };
  Type type = Type::kMissing;
  int64_t i = 0;  // kInt; kUint: the bits of the uint64 (u())
  double f = 0;
  std::string s;

  /// kUint's value.
  uint64_t u() const { return static_cast<uint64_t>(i); }
  /// kInt/kUint/kFloat as a double; nullopt otherwise.
  std::optional<double> AsNumber() const;
  /// From a CSV cell (see above).
  static FieldValue FromText(const std::string& text);
};

/// Which JSONL keys / CSV columns the manifests read (--image-field, --caption-field), and for
/// wds the keys of each sample's .json member (caption and extra; its image is its image
/// member). Empty lists mean the defaults above. Not used by the files and coco formats.
struct FieldNames {
  std::vector<std::string> image;    // the first present names the image
  std::vector<std::string> caption;  // every present one adds caption(s)
  std::vector<std::string> extra;    // kept per sample in RawSample::fields, in this order
  // A caption longer than this many bytes is kept as its first max_caption_bytes + 1 bytes:
  // still over the limit, so `mmpack build` drops it as caption_too_large all the same (the size
  // is checked first: text/caption.h), but megabytes of it do not travel through the ingest's
  // sorts and files (the manifests cut them as they are read; COCO, folders and tars, whose
  // captions are bounded by the file or member, before the key rules). -1: no cap.
  int64_t max_caption_bytes = -1;
};

/// One image with its captions, as the input gave them.
struct RawSample {
  std::string key;                    // unique in the set
  std::string source;                 // image path (or "tar_file:member") as given, UTF-8
  std::string path;                   // file to read; for wds, the tar file
  std::string tar_member;             // wds only: the image member's name in `path`
  int64_t tar_member_index = -1;      // wds only: position of the member in the tar (0-based)
  std::vector<std::string> captions;  // raw bytes, input order (validated later)
  std::vector<FieldValue> fields;     // FieldNames::extra's values (first line of the image)
};

/// Something the input named that cannot become a sample (a bad manifest line, an image
/// without captions, a caption file without image). Goes to report.json as a dropped entry.
struct IngestIssue {
  std::string source;
  std::string key;
  // invalid_manifest_line | missing_caption | missing_file | duplicate_key | unreadable |
  // invalid_utf8 (a name that is not UTF-8) | file_too_large (a caption file over 16 MiB) |
  // remote_image_not_supported (a URL the manifest may not name: image_url.h)
  std::string reason;
  std::string detail;
};

class SampleList;  // ingest/sample_list.h

struct IngestResult {
  InputFormat format = InputFormat::kAuto;  // the format used (never kAuto)
  std::vector<RawSample> samples;           // Ingest: every sample, in order; IngestToList: empty
  std::unique_ptr<SampleList> list;         // IngestToList: every sample, in order, on disk
  std::vector<IngestIssue> issues;
  std::vector<std::string> notes;  // not about a sample (a folder skipped as a loop): stderr
  IngestResult();
  ~IngestResult();
  IngestResult(IngestResult&&) noexcept;
  IngestResult& operator=(IngestResult&&) noexcept;
};

/// Detects the format of `input` (a folder or a file) from its extension or contents:
/// .jsonl/.ndjson -> jsonl, .csv -> csv, .tsv -> tsv, .json -> coco (jsonl when its first line
/// is a sample object), .tar -> wds; a folder with `metadata.jsonl` or `metadata.csv` (a
/// Hugging Face imagefolder) -> that manifest's format; a folder with no images, .txt or .tar
/// at its top level
/// and one manifest there (say coco-cc/ with captions.jsonl) -> that manifest's format (Ingest
/// then reads the manifest; .jsonl preferred over .csv, .tsv, .json); a folder with .tar
/// files and no images -> wds; another folder -> files.
/// Errors: NotFound (no such path), InvalidArgument (cannot tell).
[[nodiscard]] Result<InputFormat> DetectInputFormat(const std::string& input);

/// Whether `path` is a URL ("http://...", "s3://..."): letters, digits, '+', '-' or '.'
/// then "://", as RFC 3986 schemes are written. A Windows path "C:\x" is not. Such an input is
/// read through the remote layer (remote_file.h), such an output refused (set/output_dir.h).
bool IsRemoteUrl(const std::string& path);

/// Enumerates `input` in `format` (kAuto: DetectInputFormat), reading manifests' `fields`,
/// into IngestResult::list, whose file and the sorts' files are unnamed files in `spill_dir`
/// (gone when the process ends, however it ends).
/// Errors: NotFound, IOError (unreadable input; `spill_dir` not writable or full),
/// InvalidArgument (malformed as a whole, e.g. a CSV without an image column or a COCO file
/// that is not JSON). Per-line or per-file problems are IngestIssues, not errors.
[[nodiscard]] Result<IngestResult> IngestToList(const std::string& input, InputFormat format,
                                                const FieldNames& fields,
                                                const std::filesystem::path& spill_dir);

/// IngestToList (spilling in the system's temporary folder), with the samples read back into
/// IngestResult::samples: for small inputs and the tests.
[[nodiscard]] Result<IngestResult> Ingest(const std::string& input, InputFormat format,
                                          const FieldNames& fields = {});

/// The encoded image of a sample read from a file of its own (not a tar member): the local file
/// `path`, or the object at the URL `path` (ReadRemoteFile, remote_file.h: one GET, retried), of
/// at most `max_bytes` (-1: no limit). Thread-safe. Errors: NotFound (missing file; HTTP 404),
/// IOError (unreadable; a fetch that failed after its retries, naming the URL), OutOfRange (over
/// `max_bytes`), InvalidArgument (a malformed URL).
[[nodiscard]] Status ReadImageFile(const std::string& path, std::string* bytes,
                                   int64_t max_bytes = -1);

/// Reads the image bytes of samples in order. For plain files it reads the file; for wds it
/// keeps the tar open and moves forward to the member (reopening only if asked to go back),
/// so a tar is read once, sequentially. Not thread-safe: one reader per thread.
class ImageReader {
 public:
  ImageReader();
  ~ImageReader();
  ImageReader(const ImageReader&) = delete;
  ImageReader& operator=(const ImageReader&) = delete;

  /// Fills `bytes` with the sample's encoded image, of at most `max_bytes` (-1: no limit).
  /// Errors: NotFound (missing file or member), IOError (unreadable), Unsupported (a sparse
  /// tar member: its holes are never read into memory), OutOfRange (over `max_bytes`,
  /// known from the file's or member's size before anything is read).
  [[nodiscard]] Status Read(const RawSample& sample, std::string* bytes, int64_t max_bytes = -1);

 private:
  struct Tar;
  std::unique_ptr<Tar> tar_;
};

}  // namespace mm::pack

// formats.h: one reader per input format (private to ingest/; Ingest in ingest.cc picks one).
// Each enumerates its input into an IngestResult: samples in input order with keys, and an
// IngestIssue for every line, row, file or member that cannot become a sample. ingest.h says
// what each format is.
#pragma once

#include <filesystem>
#include <string>

#include "ingest/ingest.h"
#include "ingest/manifest.h"
#include "ingest/sample_list.h"

namespace mm::pack {

/// jsonl.cc: into IngestResult::list (finished), grouped through sorts in `spill_dir`; image
/// paths resolved against `manifest.base` (image_url.h). Errors: IOError (the file cannot be
/// mapped; spill files).
[[nodiscard]] Result<IngestResult> IngestJsonl(const ManifestFile& manifest,
                                               const FieldNames& fields,
                                               const std::filesystem::path& spill_dir);
/// csv.cc: CSV (`format` kCsv: ',' separated, or ';' when the header has ';' and no ','; RFC
/// 4180 quoting) and TSV (kTsv: '\t', no quoting). Into IngestResult::list (finished), as jsonl.
/// Errors: IOError (the file cannot be mapped; spill files); InvalidArgument (no header row, or
/// one without an image and a text column).
[[nodiscard]] Result<IngestResult> IngestDelimited(const ManifestFile& manifest, InputFormat format,
                                                   const FieldNames& fields,
                                                   const std::filesystem::path& spill_dir);
/// coco.cc: into IngestResult::list (finished), parsed with a SAX reader and joined through
/// sorts in `spill_dir`. Errors: those of OpenRegularFile; InvalidArgument (not a COCO captions
/// JSON); IOError (spill files).
[[nodiscard]] Result<IngestResult> IngestCoco(const std::filesystem::path& file,
                                              const std::filesystem::path& spill_dir);
/// files.cc: a folder of pairs, into IngestResult::list (finished), listed and paired through
/// sorts in `spill_dir`. Errors: IOError (the folder cannot be listed; spill files).
[[nodiscard]] Result<IngestResult> IngestFiles(const std::filesystem::path& root,
                                               const std::filesystem::path& spill_dir);
/// wds.cc: one .tar, a folder of .tar files or a brace list of them (brace.h; a named tar
/// that does not exist is an issue), into IngestResult::list (finished), with `fields`' kept
/// values and, when it names caption fields, the captions from each sample's .json member;
/// memory: one tar's members at a time. Errors: NotFound (no tar of a brace list exists),
/// IOError, InvalidArgument (a folder without .tar files, a malformed brace list).
[[nodiscard]] Result<IngestResult> IngestWds(const std::string& input, const FieldNames& fields,
                                             const std::filesystem::path& spill_dir);

/// remote_manifest.cc: the JSONL, CSV or TSV manifest at `url` (kAuto: from its extension;
/// a URL without one, or ending in '/', is a folder whose Hugging Face `metadata.jsonl` or
/// `metadata.csv` is read: a remote folder is never listed), fetched into `spill_dir` and read
/// as a local one, its image paths resolved against its URL (image_url.h).
/// Errors: NotFound (no such object; a folder without metadata), InvalidArgument (a format
/// that is not a manifest of lines or rows; COCO), those of FetchManifest and IngestManifest.
[[nodiscard]] Result<IngestResult> IngestRemoteManifest(const std::string& url, InputFormat format,
                                                        const FieldNames& fields,
                                                        const std::filesystem::path& spill_dir);

/// detect.cc: the manifest format a file name's extension says (any case): kJsonl (.jsonl,
/// .ndjson), kCsv (.csv), kTsv (.tsv, .tab), kCoco for .json (JSONL or COCO: JsonManifestFormat
/// of its first MiB tells), kAuto for any other name.
InputFormat ManifestFormatOfName(const std::string& name);

/// detect.cc: a .json manifest's format from its first MiB `head`: kJsonl when its first line
/// is a sample object (an image field and no `images`), else kCoco (also when the first MiB
/// holds no newline: a COCO file is often one line).
InputFormat JsonManifestFormat(std::string head);

/// detect.cc: the manifest of a Hugging Face `imagefolder` (`metadata.jsonl`, else
/// `metadata.csv`, at its top level, beside the images or above them), else the one manifest of
/// a set folder such as ../shared/data/coco-cc (no pairs at its top level; .jsonl preferred,
/// then .csv, .tsv, .json), or "" when the folder is neither.
std::string ManifestInFolder(const std::filesystem::path& dir);

}  // namespace mm::pack

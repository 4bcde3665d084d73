// files.cc: a folder of pairs, key.jpg beside key.txt (ingest.h, "files").
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ingest/common.h"
#include "ingest/formats.h"
#include "ingest/keys.h"
#include "mm/internal/file.h"
#include "text/ascii.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;

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

}  // namespace

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

}  // namespace mm::pack

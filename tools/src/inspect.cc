// inspect.cc: `mmpack info`, `mmpack verify` and `mmpack env` (see commands.h).
//
// verify checks a shard set against the embedded schema (schemas/shard_v1.json via
// mm::format::SchemaJson()): index.json's keys, every shard's checksum and size, root
// attributes, every dataset's dtype, rank, shape, layout, chunking and filter, the counts and
// offsets of the ragged tables, key uniqueness, and it decodes every image chunk. It stops at
// the first problem and names the shard and, where one is to blame, the sample.
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

#include "commands.h"
#include "h5_util.h"
#include "human_bytes.h"
#include "mm/format.h"

namespace mm::pack {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

Result<int> OpenRegularFile(const fs::path& path);

Result<json> ReadJsonFile(const fs::path& path) {
  {
    Result<int> fd = OpenRegularFile(path);  // never block on a FIFO named index.json
    if (!fd.ok()) {
      if (fd.status().IsNotFound()) {
        return Status::NotFound(path.string() + " does not exist or cannot be read");
      }
      return fd.status();
    }
    ::close(*fd);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path.string() + " does not exist or cannot be read");
  json value = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded() || !value.is_object()) {
    return Status::Corruption(path.string() + " is not a JSON object");
  }
  return value;
}

// Reads a number from a JSON object, or `fallback` when absent or not a number.
int64_t IntOr(const json& object, const char* key, int64_t fallback) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_number_integer()) {
    return fallback;
  }
  return object[key].get<int64_t>();
}

std::string StringOr(const json& object, const char* key, const std::string& fallback) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_string()) return fallback;
  return object[key].get<std::string>();
}

// Opens `path` for reading without blocking (a FIFO would wait for a writer for ever) and
// refuses what is not a regular file (a FIFO, or a device such as /dev/zero that never
// ends), so a hostile index.json cannot hang `mmpack verify`. Returns the fd, or an error.
Result<int> OpenRegularFile(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return Status::NotFound(path.filename().string() + " is missing");
    return Status::IOError("open " + path.string() + ": " + std::strerror(err));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::Corruption(path.string() + " is not a regular file");
  }
  return fd;
}

Result<std::string> HashFile(const fs::path& path) {
  MM_ASSIGN_OR_RETURN(int fd, OpenRegularFile(path));
  struct StateDeleter {
    void operator()(XXH3_state_t* s) const { XXH3_freeState(s); }
  };
  std::unique_ptr<XXH3_state_t, StateDeleter> state(XXH3_createState());
  XXH3_64bits_reset(state.get());
  std::vector<char> buffer(1 << 20);
  while (true) {
    ssize_t got = ::read(fd, buffer.data(), buffer.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      int err = errno;
      ::close(fd);
      return Status::IOError("read " + path.string() + ": " + std::strerror(err));
    }
    if (got == 0) break;
    XXH3_64bits_update(state.get(), buffer.data(), static_cast<size_t>(got));
  }
  ::close(fd);
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx",
                static_cast<unsigned long long>(XXH3_64bits_digest(state.get())));
  return std::string(hex);
}

// SHA-256 of a file as 64 lowercase hex digits (the tokenizer's identity in the index).
Result<std::string> Sha256File(const fs::path& path) {
  MM_ASSIGN_OR_RETURN(int fd, OpenRegularFile(path));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct MdDeleter {
    void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
  };
  std::unique_ptr<EVP_MD_CTX, MdDeleter> ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    return Status::Internal("EVP_DigestInit_ex(sha256) failed");
  }
  std::vector<char> buffer(1 << 16);
  for (;;) {
    ssize_t got = ::read(fd, buffer.data(), buffer.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return Status::IOError("reading " + path.string() + ": " + std::strerror(errno));
    if (got == 0) break;
    EVP_DigestUpdate(ctx.get(), buffer.data(), static_cast<size_t>(got));
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &length);
  std::string hex;
  char two[3];
  for (unsigned i = 0; i < length; ++i) {
    std::snprintf(two, sizeof(two), "%02x", digest[i]);
    hex += two;
  }
  return hex;
}

struct DctxDeleter {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

// What one shard must hold, from the index.
struct Expected {
  std::string file;
  int64_t index = 0;
  int64_t samples = 0;
  int64_t captions = 0;
  int64_t tokens = 0;
  int64_t height = 0;
  int64_t width = 0;
  std::string compression;
  std::string tokenizer_sha256;
  int64_t vocab_size = 0;  // 0: unknown, token ids not range-checked
};

// Resolves a schema shape entry ("N", "N+1", "C", "C+1", "T", "image_height", 3) to a number.
Result<int64_t> ResolveDim(const json& dim, const Expected& e) {
  if (dim.is_number_integer()) return dim.get<int64_t>();
  std::string s = dim.is_string() ? dim.get<std::string>() : "";
  if (s == "N") return e.samples;
  if (s == "N+1") return e.samples + 1;
  if (s == "C") return e.captions;
  if (s == "C+1") return e.captions + 1;
  if (s == "T") return e.tokens;
  if (s == "image_height") return e.height;
  if (s == "image_width") return e.width;
  return Status::Internal("schema shape entry '" + dim.dump() + "' is not understood");
}

Status CheckDtype(hid_t type, const std::string& dtype, const std::string& name) {
  H5T_class_t cls = H5Tget_class(type);
  size_t size = H5Tget_size(type);
  auto bad = [&](const std::string& found) {
    return Status::Corruption("dataset '" + name + "' is " + found + ", the schema says " + dtype);
  };
  if (dtype == "uint8" || dtype == "int32" || dtype == "int64") {
    if (cls != H5T_INTEGER) return bad("not an integer");
    size_t want = dtype == "uint8" ? 1 : dtype == "int32" ? 4 : 8;
    H5T_sign_t sign = H5Tget_sign(type);
    bool want_signed = dtype != "uint8";
    if (size != want || (sign == H5T_SGN_2) != want_signed) {
      return bad("an integer of " + std::to_string(size) + " bytes" +
                 (sign == H5T_SGN_2 ? " (signed)" : " (unsigned)"));
    }
    return Status::OK();
  }
  if (dtype == "string-fixed" || dtype == "string-vlen") {
    if (cls != H5T_STRING) return bad("not a string");
    bool vlen = H5Tis_variable_str(type) > 0;
    if (vlen != (dtype == "string-vlen")) return bad(vlen ? "a vlen string" : "a fixed string");
    if (H5Tget_cset(type) != H5T_CSET_UTF8) return bad("a string not marked UTF-8");
    return Status::OK();
  }
  return Status::Internal("schema dtype '" + dtype + "' is not understood");
}

template <typename T>
Result<std::vector<T>> ReadNumeric(hid_t file, const char* name, hid_t mem_type, size_t count) {
  MM_ASSIGN_OR_RETURN(h5::Dataset dset, h5::Own<h5::Dataset>(H5Dopen2(file, name, H5P_DEFAULT),
                                                             std::string("opening ") + name,
                                                             StatusCode::kCorruption));
  std::vector<T> values(count);
  if (count > 0) {
    MM_RETURN_NOT_OK(
        h5::Check(H5Dread(dset.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()),
                  std::string("reading ") + name, StatusCode::kCorruption));
  }
  return values;
}

Result<std::vector<std::string>> ReadFixedStrings(hid_t file, const char* name, size_t count) {
  MM_ASSIGN_OR_RETURN(h5::Dataset dset, h5::Own<h5::Dataset>(H5Dopen2(file, name, H5P_DEFAULT),
                                                             std::string("opening ") + name,
                                                             StatusCode::kCorruption));
  MM_ASSIGN_OR_RETURN(h5::Datatype type,
                      h5::Own<h5::Datatype>(H5Dget_type(dset.get()), "H5Dget_type"));
  size_t width = H5Tget_size(type.get());
  std::vector<char> buffer(count * width);
  if (count > 0) {
    MM_RETURN_NOT_OK(
        h5::Check(H5Dread(dset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data()),
                  std::string("reading ") + name, StatusCode::kCorruption));
  }
  std::vector<std::string> out(count);
  for (size_t i = 0; i < count; ++i) {
    const char* p = buffer.data() + i * width;
    out[i].assign(p, strnlen(p, width));
  }
  return out;
}

Result<std::vector<std::string>> ReadVlenStrings(hid_t file, const char* name, size_t count) {
  MM_ASSIGN_OR_RETURN(h5::Dataset dset, h5::Own<h5::Dataset>(H5Dopen2(file, name, H5P_DEFAULT),
                                                             std::string("opening ") + name,
                                                             StatusCode::kCorruption));
  MM_ASSIGN_OR_RETURN(h5::Datatype type, h5::VlenUtf8Type());
  std::vector<char*> pointers(count, nullptr);
  if (count > 0) {
    MM_RETURN_NOT_OK(
        h5::Check(H5Dread(dset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, pointers.data()),
                  std::string("reading ") + name, StatusCode::kCorruption));
  }
  std::vector<std::string> out(count);
  for (size_t i = 0; i < count; ++i) {
    if (pointers[i] != nullptr) out[i] = pointers[i];
    H5free_memory(pointers[i]);
  }
  return out;
}

// True when `text` is well-formed UTF-8 (RFC 3629: no overlongs, surrogates or > U+10FFFF).
bool IsUtf8(const std::string& text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = p + text.size();
  while (p < end) {
    unsigned c = *p;
    int extra = 0;
    unsigned min = 0, code = 0;
    if (c < 0x80) {
      ++p;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      extra = 1, min = 0x80, code = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2, min = 0x800, code = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3, min = 0x10000, code = c & 0x07;
    } else {
      return false;
    }
    if (end - p <= extra) return false;
    for (int k = 1; k <= extra; ++k) {
      if ((p[k] & 0xC0) != 0x80) return false;
      code = (code << 6) | (p[k] & 0x3F);
    }
    if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
    p += extra + 1;
  }
  return true;
}

class ShardVerifier {
 public:
  ShardVerifier(const json& schema, std::unordered_set<std::string>* keys)
      : schema_(schema), keys_(keys) {}

  // Checks one shard file that passed its checksum. `sample` is set to the first bad sample
  // (or -1 when the problem is not one sample's).
  Status Verify(const fs::path& path, const Expected& e, int64_t* sample) {
    *sample = -1;
    MM_ASSIGN_OR_RETURN(h5::File file,
                        h5::Own<h5::File>(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT),
                                          "not a readable HDF5 file", StatusCode::kCorruption));
    MM_RETURN_NOT_OK(CheckAttributes(file.get(), e));
    for (const auto& d : schema_["datasets"]) MM_RETURN_NOT_OK(CheckDataset(file.get(), d, e));
    MM_RETURN_NOT_OK(CheckTables(file.get(), e, sample));
    return CheckChunks(file.get(), e, sample);
  }

 private:
  Status CheckAttributes(hid_t file, const Expected& e) {
    for (const auto& a : schema_["root_attributes"]) {
      std::string name = a.value("name", "");
      std::string type = a.value("type", "");
      if (type == "string") {
        MM_ASSIGN_OR_RETURN(std::string value, h5::ReadStringAttribute(file, name.c_str()));
        if (a.contains("value") && value != a["value"].get<std::string>()) {
          return Status::Corruption("attribute '" + name + "' is '" + value + "', expected '" +
                                    a["value"].get<std::string>() + "'");
        }
        if (a.contains("values")) {
          const auto& allowed = a["values"];
          if (std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
            return Status::Corruption("attribute '" + name + "' has the unknown value '" + value +
                                      "'");
          }
        }
        if (name == format::kAttrTokenizerSha256 && value != e.tokenizer_sha256) {
          return Status::Corruption("attribute 'tokenizer_sha256' is '" + value +
                                    "', the index says '" + e.tokenizer_sha256 + "'");
        }
        if (name == format::kAttrCompression && value != e.compression) {
          return Status::Corruption("attribute 'compression' is '" + value + "', the index says '" +
                                    e.compression + "'");
        }
      } else {
        MM_ASSIGN_OR_RETURN(int64_t value, h5::ReadIntAttribute(file, name.c_str()));
        if (a.contains("value") && value != a["value"].get<int64_t>()) {
          return Status::Unsupported("attribute '" + name + "' is " + std::to_string(value) +
                                     ", this build reads " + a["value"].dump());
        }
        int64_t want = -1;
        if (name == format::kAttrShardIndex) want = e.index;
        if (name == format::kAttrNumSamples) want = e.samples;
        if (name == format::kAttrNumCaptions) want = e.captions;
        if (name == format::kAttrImageHeight) want = e.height;
        if (name == format::kAttrImageWidth) want = e.width;
        if (want >= 0 && value != want) {
          return Status::Corruption("attribute '" + name + "' is " + std::to_string(value) +
                                    ", the index says " + std::to_string(want));
        }
      }
    }
    return Status::OK();
  }

  Status CheckDataset(hid_t file, const json& d, const Expected& e) {
    std::string name = d.value("name", "");
    htri_t exists = H5Lexists(file, name.c_str(), H5P_DEFAULT);
    if (exists <= 0) {
      h5::ClearErrors();
      return Status::Corruption("dataset '" + name + "' is missing");
    }
    MM_ASSIGN_OR_RETURN(
        h5::Dataset dset,
        h5::Own<h5::Dataset>(H5Dopen2(file, name.c_str(), H5P_DEFAULT),
                             "opening dataset '" + name + "'", StatusCode::kCorruption));
    MM_ASSIGN_OR_RETURN(h5::Datatype type,
                        h5::Own<h5::Datatype>(H5Dget_type(dset.get()), "H5Dget_type"));
    MM_RETURN_NOT_OK(CheckDtype(type.get(), d.value("dtype", ""), name));
    MM_ASSIGN_OR_RETURN(std::vector<hsize_t> dims, h5::DatasetDims(dset.get()));
    const auto& shape = d["shape"];
    if (dims.size() != shape.size()) {
      return Status::Corruption("dataset '" + name + "' has rank " + std::to_string(dims.size()) +
                                ", the schema says " + std::to_string(shape.size()));
    }
    for (size_t k = 0; k < dims.size(); ++k) {
      MM_ASSIGN_OR_RETURN(int64_t want, ResolveDim(shape[k], e));
      if (static_cast<int64_t>(dims[k]) != want) {
        return Status::Corruption("dataset '" + name + "' dimension " + std::to_string(k) + " is " +
                                  std::to_string(dims[k]) + ", expected " + std::to_string(want) +
                                  " (" + shape[k].dump() + ")");
      }
    }
    MM_ASSIGN_OR_RETURN(h5::PropList dcpl,
                        h5::Own<h5::PropList>(H5Dget_create_plist(dset.get()), "dcpl"));
    H5D_layout_t layout = H5Pget_layout(dcpl.get());
    std::string want_layout = d.value("layout", "any");
    if (want_layout == "contiguous" && layout != H5D_CONTIGUOUS) {
      return Status::Corruption("dataset '" + name + "' is not contiguous");
    }
    if (want_layout == "chunked") {
      if (layout != H5D_CHUNKED) return Status::Corruption("dataset '" + name + "' is not chunked");
      std::vector<hsize_t> chunk(dims.size());
      H5Pget_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data());
      const auto& want_chunk = d["chunk"];
      for (size_t k = 0; k < chunk.size() && k < want_chunk.size(); ++k) {
        MM_ASSIGN_OR_RETURN(int64_t want, ResolveDim(want_chunk[k], e));
        if (static_cast<int64_t>(chunk[k]) != want) {
          return Status::Corruption("dataset '" + name + "' chunk dimension " + std::to_string(k) +
                                    " is " + std::to_string(chunk[k]) + ", expected " +
                                    std::to_string(want));
        }
      }
    }
    if (d.contains("filter")) {
      bool has_zstd = H5Pget_filter_by_id2(dcpl.get(), format::kZstdFilterId, nullptr, nullptr,
                                           nullptr, 0, nullptr, nullptr) >= 0;
      h5::ClearErrors();  // a "filter not found" entry
      int nfilters = H5Pget_nfilters(dcpl.get());
      if (e.compression == "zstd" && (!has_zstd || nfilters != 1)) {
        return Status::Corruption("dataset '" + name + "' lacks the zstd filter (32015) alone");
      }
      if (e.compression == "none" && nfilters != 0) {
        return Status::Corruption("dataset '" + name + "' has filters but compression is none");
      }
    }
    return Status::OK();
  }

  Status CheckTables(hid_t file, const Expected& e, int64_t* sample) {
    const size_t n = static_cast<size_t>(e.samples);
    const size_t c = static_cast<size_t>(e.captions);
    MM_ASSIGN_OR_RETURN(auto caption_offsets, ReadNumeric<int64_t>(file, format::kCaptionOffsets,
                                                                   H5T_NATIVE_INT64, n + 1));
    if (caption_offsets.front() != 0 || caption_offsets.back() != e.captions) {
      return Status::Corruption("caption_offsets must run from 0 to " + std::to_string(e.captions));
    }
    for (size_t i = 0; i < n; ++i) {
      if (caption_offsets[i + 1] <= caption_offsets[i]) {
        *sample = static_cast<int64_t>(i);
        return Status::Corruption("caption_offsets not strictly increasing (no caption)");
      }
    }
    MM_ASSIGN_OR_RETURN(auto token_offsets,
                        ReadNumeric<int64_t>(file, format::kTokenOffsets, H5T_NATIVE_INT64, c + 1));
    if (token_offsets.front() != 0 || token_offsets.back() != e.tokens) {
      return Status::Corruption("token_offsets must run from 0 to " + std::to_string(e.tokens));
    }
    for (size_t k = 0; k < c; ++k) {
      if (token_offsets[k + 1] < token_offsets[k]) {
        auto it = std::upper_bound(caption_offsets.begin(), caption_offsets.end(),
                                   static_cast<int64_t>(k));
        *sample = static_cast<int64_t>(it - caption_offsets.begin()) - 1;
        return Status::Corruption("token_offsets decrease at caption " + std::to_string(k));
      }
    }
    MM_ASSIGN_OR_RETURN(auto tokens, ReadNumeric<int32_t>(file, format::kTokens, H5T_NATIVE_INT32,
                                                          static_cast<size_t>(e.tokens)));
    for (size_t t = 0; t < tokens.size(); ++t) {
      if (tokens[t] < 0 || (e.vocab_size > 0 && tokens[t] >= e.vocab_size)) {
        auto ct =
            std::upper_bound(token_offsets.begin(), token_offsets.end(), static_cast<int64_t>(t));
        int64_t caption = static_cast<int64_t>(ct - token_offsets.begin()) - 1;
        auto st = std::upper_bound(caption_offsets.begin(), caption_offsets.end(), caption);
        *sample = static_cast<int64_t>(st - caption_offsets.begin()) - 1;
        return Status::Corruption("token id " + std::to_string(tokens[t]) +
                                  " outside the vocabulary of " + std::to_string(e.vocab_size));
      }
    }
    MM_ASSIGN_OR_RETURN(auto keys, ReadFixedStrings(file, format::kKeys, n));
    for (size_t i = 0; i < n; ++i) {
      if (keys[i].empty() || !keys_->insert(keys[i]).second) {
        *sample = static_cast<int64_t>(i);
        return Status::Corruption("key '" + keys[i] + "' is empty or not unique in the set");
      }
    }
    for (size_t i = 0; i < n; ++i) {
      if (!IsUtf8(keys[i])) {
        *sample = static_cast<int64_t>(i);
        return Status::Corruption("key is not valid UTF-8");
      }
    }
    keys_of_shard_ = std::move(keys);
    MM_ASSIGN_OR_RETURN(auto sources, ReadVlenStrings(file, format::kSources, n));
    for (size_t i = 0; i < n; ++i) {
      if (!IsUtf8(sources[i])) {
        *sample = static_cast<int64_t>(i);
        return Status::Corruption("source is not valid UTF-8");
      }
    }
    MM_ASSIGN_OR_RETURN(auto captions, ReadVlenStrings(file, format::kCaptions, c));
    for (size_t i = 0; i < n; ++i) {
      for (int64_t k = caption_offsets[i]; k < caption_offsets[i + 1]; ++k) {
        const std::string& caption = captions[static_cast<size_t>(k)];
        if (caption.empty() || !IsUtf8(caption)) {
          *sample = static_cast<int64_t>(i);
          return Status::Corruption("caption " + std::to_string(k) + " is empty or not UTF-8");
        }
      }
    }
    MM_ASSIGN_OR_RETURN(auto sizes,
                        ReadNumeric<int32_t>(file, format::kOriginalSize, H5T_NATIVE_INT32, n * 2));
    for (size_t i = 0; i < n; ++i) {
      if (sizes[2 * i] <= 0 || sizes[2 * i + 1] <= 0) {
        *sample = static_cast<int64_t>(i);
        return Status::Corruption("original_size is not positive");
      }
    }
    MM_ASSIGN_OR_RETURN(auto boxes,
                        ReadNumeric<int32_t>(file, format::kValidBox, H5T_NATIVE_INT32, n * 4));
    for (size_t i = 0; i < n; ++i) {
      const int32_t* b = &boxes[i * 4];
      if (b[0] < 0 || b[1] < 0 || b[2] <= 0 || b[3] <= 0 || b[0] + b[2] > e.width ||
          b[1] + b[3] > e.height) {
        *sample = static_cast<int64_t>(i);
        return Status::Corruption("valid_box outside the image");
      }
    }
    return Status::OK();
  }

  Status CheckChunks(hid_t file, const Expected& e, int64_t* sample) {
    MM_ASSIGN_OR_RETURN(h5::Dataset images,
                        h5::Own<h5::Dataset>(H5Dopen2(file, format::kImages, H5P_DEFAULT),
                                             "opening images", StatusCode::kCorruption));
    const size_t image_bytes = static_cast<size_t>(e.height * e.width * 3);
    std::vector<uint8_t> raw;
    std::vector<uint8_t> pixels(image_bytes);
    std::unique_ptr<ZSTD_DCtx, DctxDeleter> dctx(ZSTD_createDCtx());
    for (int64_t i = 0; i < e.samples; ++i) {
      *sample = i;
      hsize_t offset[4] = {static_cast<hsize_t>(i), 0, 0, 0};
      hsize_t stored = 0;
      if (H5Dget_chunk_storage_size(images.get(), offset, &stored) < 0 || stored == 0) {
        return h5::ErrorFromStack(StatusCode::kCorruption, "image chunk missing");
      }
      raw.resize(stored);
      uint32_t filter_mask = 0;
      MM_RETURN_NOT_OK(
          h5::Check(H5Dread_chunk(images.get(), H5P_DEFAULT, offset, &filter_mask, raw.data()),
                    "reading image chunk", StatusCode::kCorruption));
      if (e.compression == "none" || (filter_mask & 1u)) {
        if (raw.size() != image_bytes) {
          return Status::Corruption("raw image chunk of " + std::to_string(raw.size()) +
                                    " bytes, expected " + std::to_string(image_bytes));
        }
        continue;
      }
      unsigned long long content = ZSTD_getFrameContentSize(raw.data(), raw.size());
      if (content != image_bytes) {
        return Status::Corruption("image chunk is not a zstd frame of " +
                                  std::to_string(image_bytes) + " bytes");
      }
      size_t got =
          ZSTD_decompressDCtx(dctx.get(), pixels.data(), pixels.size(), raw.data(), raw.size());
      if (ZSTD_isError(got)) {
        return Status::Corruption(std::string("image chunk does not decode: ") +
                                  ZSTD_getErrorName(got));
      }
      if (got != image_bytes) {
        return Status::Corruption("image chunk decodes to " + std::to_string(got) + " bytes");
      }
    }
    *sample = -1;
    return Status::OK();
  }

 public:
  std::vector<std::string> keys_of_shard_;

 private:
  const json& schema_;
  std::unordered_set<std::string>* keys_;
};

Status VerifyIndexShape(const json& index, const json& schema) {
  for (const auto& key : schema["index"]["required_keys"]) {
    if (!index.contains(key.get<std::string>())) {
      return Status::Corruption("index.json lacks '" + key.get<std::string>() + "'");
    }
  }
  if (StringOr(index, "format", "") != format::kFormatName) {
    return Status::Corruption("index.json format is not '" + std::string(format::kFormatName) +
                              "'");
  }
  int64_t version = IntOr(index, "format_version", -1);
  if (version < format::kMinReadableVersion || version > format::kFormatVersion) {
    return Status::Unsupported("index.json has format_version " + std::to_string(version) +
                               "; this build reads " + std::to_string(format::kMinReadableVersion) +
                               ".." + std::to_string(format::kFormatVersion));
  }
  if (!index["shards"].is_array()) return Status::Corruption("index.json 'shards' is not a list");
  for (size_t i = 0; i < index["shards"].size(); ++i) {
    const json& s = index["shards"][i];
    for (const auto& key : schema["index"]["shard_keys"]) {
      if (!s.is_object() || !s.contains(key.get<std::string>())) {
        return Status::Corruption("index.json shard " + std::to_string(i) + " lacks '" +
                                  key.get<std::string>() + "'");
      }
    }
  }
  return Status::OK();
}

std::string ShardName(int64_t i) {
  char name[64];
  std::snprintf(name, sizeof(name), "%s%06" PRId64 "%s", std::string(format::kShardPrefix).c_str(),
                i, std::string(format::kShardSuffix).c_str());
  return name;
}

Status VerifySet(const std::string& dir, std::ostream& out) {
  h5::SilenceErrors();
  MM_RETURN_NOT_OK(h5::RegisterZstdFilter());
  json schema = json::parse(format::SchemaJson(), nullptr, false);
  if (schema.is_discarded()) return Status::Internal("embedded schema is not valid JSON");
  fs::path root(dir);
  MM_ASSIGN_OR_RETURN(json index, ReadJsonFile(root / format::kIndexFile));
  MM_RETURN_NOT_OK(VerifyIndexShape(index, schema));

  Expected base;
  base.height = IntOr(index["image"], "height", 0);
  base.width = IntOr(index["image"], "width", 0);
  base.compression = StringOr(index["compression"], "codec", "");
  base.vocab_size = IntOr(index["tokenizer"], "vocab_size", 0);
  base.tokenizer_sha256 = StringOr(index["tokenizer"], "sha256", "");
  // The tokenizer whose ids the shards hold ships with them.
  std::string tokenizer_file =
      StringOr(index["tokenizer"], "file", std::string(format::kTokenizerFile));
  MM_ASSIGN_OR_RETURN(std::string tokenizer_sha, Sha256File(root / tokenizer_file));
  if (tokenizer_sha != base.tokenizer_sha256) {
    return Status::Corruption(tokenizer_file + ": sha256 is " + tokenizer_sha +
                              ", index.json says '" + base.tokenizer_sha256 + "'");
  }
  if (base.height <= 0 || base.width <= 0) {
    return Status::Corruption("index.json image height/width missing or not positive");
  }
  if (IntOr(index["image"], "channels", 3) != 3) {
    return Status::Corruption("index.json image channels is not 3");
  }

  std::unordered_set<std::string> keys;
  ShardVerifier verifier(schema, &keys);
  int64_t samples = 0, captions = 0, tokens = 0, bytes = 0;
  const json& shards = index["shards"];
  for (size_t i = 0; i < shards.size(); ++i) {
    const json& s = shards[i];
    Expected e = base;
    e.index = static_cast<int64_t>(i);
    e.file = StringOr(s, "file", "");
    e.samples = IntOr(s, "samples", -1);
    e.captions = IntOr(s, "captions", -1);
    e.tokens = IntOr(s, "tokens", -1);
    int64_t want_bytes = IntOr(s, "bytes", -1);
    std::string want_hash = StringOr(s, "xxh3_64", "");
    std::string label = e.file.empty() ? "shard " + std::to_string(i) : e.file;
    if (e.file != ShardName(e.index)) {
      return Status::Corruption("index.json shard " + std::to_string(i) + " is named '" + e.file +
                                "', expected '" + ShardName(e.index) + "'");
    }
    if (e.samples <= 0 || e.captions < e.samples || e.tokens < 0 || want_bytes <= 0) {
      return Status::Corruption(label + ": index.json counts are not valid");
    }
    fs::path path = root / e.file;
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
      if (fs::exists(path, ec)) {
        return Status::Corruption(label + ": shard file is not a regular file");
      }
      return Status::NotFound(label + ": shard file is missing");
    }
    int64_t size = static_cast<int64_t>(fs::file_size(path, ec));
    if (ec) return Status::IOError(label + ": " + ec.message());
    if (size != want_bytes) {
      return Status::Corruption(label + ": " + std::to_string(size) + " bytes, index.json says " +
                                std::to_string(want_bytes) +
                                (size < want_bytes ? " (truncated)" : ""));
    }
    MM_ASSIGN_OR_RETURN(std::string hash, HashFile(path));
    Status checksum =
        hash == want_hash
            ? Status::OK()
            : Status::Corruption(label + ": xxh3_64 is " + hash + ", index.json says " + want_hash);
    int64_t bad_sample = -1;
    Status st = verifier.Verify(path, e, &bad_sample);
    if (!st.ok()) {
      std::string where = label;
      if (bad_sample >= 0) {
        where += " sample " + std::to_string(bad_sample);
        if (static_cast<size_t>(bad_sample) < verifier.keys_of_shard_.size()) {
          where += " (key '" + verifier.keys_of_shard_[static_cast<size_t>(bad_sample)] + "')";
        }
      }
      if (!checksum.ok()) where += " (checksum mismatch too)";
      return st.WithContext(where);
    }
    MM_RETURN_NOT_OK(checksum);  // structure and chunks fine, but the bytes changed
    samples += e.samples;
    captions += e.captions;
    tokens += e.tokens;
    bytes += size;
  }
  const json& totals = index["totals"];
  if (IntOr(totals, "shards", -1) != static_cast<int64_t>(shards.size()) ||
      IntOr(totals, "samples", -1) != samples || IntOr(totals, "captions", -1) != captions ||
      IntOr(totals, "tokens", -1) != tokens || IntOr(totals, "bytes", -1) != bytes) {
    return Status::Corruption(
        "index.json totals do not match its shards (" + std::to_string(shards.size()) +
        " shards, " + std::to_string(samples) + " samples, " + std::to_string(captions) +
        " captions, " + std::to_string(tokens) + " tokens, " + std::to_string(bytes) + " bytes)");
  }
  // A shard file beyond the index is a leftover of another build.
  fs::path extra = root / ShardName(static_cast<int64_t>(shards.size()));
  std::error_code ec;
  if (fs::exists(extra, ec)) {
    return Status::Corruption(extra.filename().string() +
                              " exists but index.json does not list it");
  }
  out << "verify: OK: " << shards.size() << " shards, " << samples << " samples, " << captions
      << " captions, " << tokens << " tokens, " << HumanBytes(static_cast<double>(bytes))
      << "; checksums, schema, offsets, keys and every image chunk checked\n";
  return Status::OK();
}

}  // namespace

Status RunVerify(const std::string& dir, std::ostream& out) {
  try {
    return VerifySet(dir, out);
  } catch (const json::exception& e) {
    // index.json with a value of the wrong JSON type.
    return Status::Corruption(std::string("index.json: ") + e.what());
  }
}

Status RunInfo(const std::string& dir, std::ostream& out) {
  fs::path root(dir);
  MM_ASSIGN_OR_RETURN(json index, ReadJsonFile(root / format::kIndexFile));
  try {
    const json& image = index.value("image", json::object());
    const json& comp = index.value("compression", json::object());
    const json& tok = index.value("tokenizer", json::object());
    const json& totals = index.value("totals", json::object());
    const json& dropped = index.value("dropped", json::object());
    int64_t samples = IntOr(totals, "samples", 0);
    int64_t captions = IntOr(totals, "captions", 0);
    int64_t tokens = IntOr(totals, "tokens", 0);
    int64_t bytes = IntOr(totals, "bytes", 0);
    int64_t shards = IntOr(totals, "shards", 0);
    int64_t height = IntOr(image, "height", 0);
    int64_t width = IntOr(image, "width", 0);
    auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
    out << std::fixed << std::setprecision(2);
    out << "set:          " << fs::absolute(root).lexically_normal().string() << "\n";
    out << "format:       " << StringOr(index, "format", "?") << " v"
        << IntOr(index, "format_version", 0) << " (" << StringOr(index, "created_by", "?") << ")\n";
    out << "samples:      " << samples << " in " << shards << " shard" << (shards == 1 ? "" : "s")
        << "\n";
    out << "captions:     " << captions << " (" << ratio(captions, samples) << " per sample)\n";
    out << "tokens:       " << tokens << " (" << ratio(tokens, captions) << " per caption)\n";
    out << "bytes:        " << HumanBytes(static_cast<double>(bytes)) << " ("
        << HumanBytes(ratio(bytes, samples)) << " per sample)\n";
    out << "images:       " << width << "x" << height << "x" << IntOr(image, "channels", 3)
        << " uint8, resize " << StringOr(image, "resize_mode", "?") << ", background "
        << StringOr(image, "background", "?") << "\n";
    std::string codec = StringOr(comp, "codec", "?");
    out << "compression:  " << codec;
    if (codec == "zstd") {
      out << " level " << IntOr(comp, "level", 0) << " (HDF5 filter "
          << IntOr(comp, "hdf5_filter_id", format::kZstdFilterId) << ")";
    }
    double raw = static_cast<double>(samples) * static_cast<double>(height * width * 3);
    if (bytes > 0 && raw > 0) out << ", raw pixels / file bytes " << ratio(raw, bytes);
    out << "\n";
    std::string sha = StringOr(tok, "sha256", "");
    out << "tokenizer:    " << StringOr(tok, "file", "?") << " (sha256 "
        << sha.substr(0, std::min<size_t>(sha.size(), 16)) << (sha.size() > 16 ? "..." : "")
        << (tok.value("trained", false) ? ", trained on the captions" : ", pretrained")
        << "), vocab " << IntOr(tok, "vocab_size", 0) << ", pad " << IntOr(tok, "pad_id", 0)
        << ", unk " << IntOr(tok, "unk_id", 0) << ", bos " << IntOr(tok, "bos_id", -1) << ", eos "
        << IntOr(tok, "eos_id", -1) << ", max tokens " << IntOr(tok, "max_tokens", 0) << "\n";
    auto report = ReadJsonFile(root / format::kReportFile);
    // Counts by reason: the index's, or report.json's when the index has none.
    json by_reason = dropped.value("by_reason", json::object());
    if ((!by_reason.is_object() || by_reason.empty()) && report.ok()) {
      by_reason = report->value("dropped_by_reason", json::object());
    }
    int64_t dropped_total = IntOr(dropped, "total", 0);
    if (dropped_total == 0 && by_reason.is_object()) {
      for (const auto& [reason, count] : by_reason.items()) {
        if (count.is_number_integer()) dropped_total += count.get<int64_t>();
      }
    }
    out << "dropped:      " << dropped_total;
    if (by_reason.is_object() && !by_reason.empty()) {
      out << " (";
      bool first = true;
      for (const auto& [reason, count] : by_reason.items()) {
        out << (first ? "" : ", ") << reason << " " << count.dump();
        first = false;
      }
      out << ")";
    }
    out << "\n";
    if (report.ok() && report->contains("truncated_captions")) {
      out << "truncated:    " << IntOr(*report, "truncated_captions", 0)
          << " captions cut to max tokens (report.json)\n";
    }
  } catch (const json::exception& e) {
    return Status::Corruption(std::string("index.json: ") + e.what());
  }
  return Status::OK();
}

std::string EnvScript() {
  // The build tree's plugin folder; for an installed mmpack (bin/mmpack), the plugin that
  // `cmake --install` put in lib/hdf5/plugins beside it.
  std::string dir = MM_PLUGIN_DIR;
  std::error_code ec;
  if (!fs::exists(fs::path(dir) / "libh5z_zstd.so", ec)) {
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    fs::path installed = exe.parent_path().parent_path() / "lib" / "hdf5" / "plugins";
    if (!ec && fs::exists(installed / "libh5z_zstd.so", ec)) dir = installed.string();
  }
  return "# mmpack: lets h5dump and h5py read zstd-compressed shards (HDF5 filter 32015)\n"
         "export HDF5_PLUGIN_PATH='" +
         dir + "'${HDF5_PLUGIN_PATH:+:$HDF5_PLUGIN_PATH}\n";
}

}  // namespace mm::pack

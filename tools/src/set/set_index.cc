// set_index.cc: see set_index.h.
#include "set/set_index.h"

#include <filesystem>

#include "mm/format.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Bytes of a remote index.json read at most (as ShardSet::Open reads it).
constexpr int64_t kMaxRemoteIndexBytes = int64_t{256} << 20;

// The text of index.json, a missing local one named as info and verify always have.
Result<std::string> ReadIndex(const mm::reader::internal::SetFiles& files) {
  if (files.remote()) return files.Read(std::string(mm::format::kIndexFile), kMaxRemoteIndexBytes);
  const std::string& dir = files.root();
  auto text = mm::reader::internal::ReadIndexText(dir);
  if (text.status().IsNotFound()) {
    return Status::NotFound((fs::path(dir) / mm::format::kIndexFile).string() +
                            " does not exist or cannot be read");
  }
  return text;
}

Status CheckIndexKeys(const json& index, const json& schema) {
  if (!index.is_object()) return Status::OK();  // the decoder says what is wrong
  for (const auto& key : schema["index"]["required_keys"]) {
    if (!index.contains(key.get<std::string>())) {
      return Status::Corruption("index.json lacks '" + key.get<std::string>() + "'");
    }
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

}  // namespace

Result<mm::reader::internal::IndexDocument> ReadSetIndex(
    const mm::reader::internal::SetFiles& files) {
  MM_ASSIGN_OR_RETURN(std::string text, ReadIndex(files));
  return mm::reader::internal::DecodeIndex(text, files.root());
}

Result<mm::reader::internal::IndexDocument> ReadSetIndexChecked(
    const mm::reader::internal::SetFiles& files, const json& schema) {
  MM_ASSIGN_OR_RETURN(std::string text, ReadIndex(files));
  json raw = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!raw.is_discarded()) MM_RETURN_NOT_OK(CheckIndexKeys(raw, schema));
  return mm::reader::internal::DecodeIndex(text, files.root());
}

Result<std::unique_ptr<mm::reader::internal::SetFiles>> OpenSetFiles(
    const std::string& location, const mm::reader::RemoteOptions& remote) {
  return mm::reader::internal::SetFiles::Open(location, remote);
}

}  // namespace mm::pack

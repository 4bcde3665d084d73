// set_index.cc: see set_index.h.
#include "commands/set_index.h"

#include <filesystem>

#include "mm/format.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The text of DIR/index.json, a missing one named as info and verify always have.
Result<std::string> ReadIndex(const std::string& dir) {
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

Result<mm::reader::internal::IndexDocument> ReadSetIndex(const std::string& dir) {
  MM_ASSIGN_OR_RETURN(std::string text, ReadIndex(dir));
  return mm::reader::internal::DecodeIndex(text, dir);
}

Result<mm::reader::internal::IndexDocument> ReadSetIndexChecked(const std::string& dir,
                                                                const json& schema) {
  MM_ASSIGN_OR_RETURN(std::string text, ReadIndex(dir));
  json raw = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!raw.is_discarded()) MM_RETURN_NOT_OK(CheckIndexKeys(raw, schema));
  return mm::reader::internal::DecodeIndex(text, dir);
}

}  // namespace mm::pack

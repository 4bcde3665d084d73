// loader_state.cc: LoaderState's one-line JSON (mm/reader.h), what a checkpoint stores to
// resume a Loader.
#include <nlohmann/json.hpp>
#include <string>

#include "mm/reader.h"

namespace mm::reader {

std::string LoaderState::ToJson() const {
  nlohmann::json j;
  j["seed"] = seed;
  j["epoch"] = epoch;
  j["consumed"] = consumed;
  j["world_size"] = world_size;
  j["batch_size"] = batch_size;
  if (!order.empty()) {
    j["order"] = order;
    j["shuffle_window"] = shuffle_window;
  }
  return j.dump();
}

Result<LoaderState> LoaderState::FromJson(std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::InvalidArgument("loader state: not a JSON object");
  }
  LoaderState s;
  try {
    if (!j.contains("epoch") || !j.contains("consumed") || !j.contains("seed")) {
      return Status::InvalidArgument("loader state: needs seed, epoch and consumed");
    }
    s.seed = j.at("seed").get<uint64_t>();
    s.epoch = j.at("epoch").get<int64_t>();
    s.consumed = j.at("consumed").get<int64_t>();
    s.world_size = j.value("world_size", 1);
    s.batch_size = j.value("batch_size", 0);
    s.order = j.value("order", std::string());
    s.shuffle_window = j.value("shuffle_window", 0);
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string("loader state: ") + e.what());
  }
  if (s.epoch < 0 || s.consumed < 0) {
    return Status::InvalidArgument("loader state: epoch and consumed must be >= 0");
  }
  return s;
}

}  // namespace mm::reader

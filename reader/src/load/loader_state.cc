// loader_state.cc: LoaderState's one-line JSON (mm/reader.h), what a checkpoint stores to
// resume a Loader, and what a loader accepts to restore (loader_state.h).
#include "load/loader_state.h"

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
  if (!set.empty()) j["set"] = set;
  if (!set_source.empty()) j["set_source"] = set_source;
  if (!caption_mode.empty()) j["caption_mode"] = caption_mode;
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
    s.set = j.value("set", std::string());
    s.set_source = j.value("set_source", std::string());
    s.caption_mode = j.value("caption_mode", std::string());
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string("loader state: ") + e.what());
  }
  if (s.epoch < 0 || s.consumed < 0) {
    return Status::InvalidArgument("loader state: epoch and consumed must be >= 0");
  }
  return s;
}

namespace internal {

Status CheckRestorable(const LoaderState& saved, const LoaderState& mine) {
  if (!saved.order.empty() &&
      (saved.order != mine.order || saved.shuffle_window != mine.shuffle_window)) {
    return Status::InvalidArgument(
        "loader state was saved under order '" + saved.order + "' (window " +
        std::to_string(saved.shuffle_window) + "), this loader reads '" + mine.order +
        "' (window " + std::to_string(mine.shuffle_window) +
        "): the same positions would be other items; use the saved shuffle options");
  }
  if (!saved.set.empty() && saved.set != mine.set) {
    return Status::InvalidArgument(
        "loader state belongs to another set or mixture: saved reading '" + saved.set_source +
        "' (set " + saved.set + "), this loader reads '" + mine.set_source + "' (set " + mine.set +
        "): other shards, weights or epoch_size make the same positions other items; restore "
        "it into a loader of the saved set");
  }
  if (!saved.caption_mode.empty() && saved.caption_mode != mine.caption_mode) {
    return Status::InvalidArgument("loader state was saved with caption mode '" +
                                   saved.caption_mode + "', this loader uses '" +
                                   mine.caption_mode + "'");
  }
  return Status::OK();
}

}  // namespace internal
}  // namespace mm::reader

#include "checkpoint.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "files.h"
#include "mm/internal/checksum.h"

namespace mm::train {

namespace {

constexpr char kTrailerPrefix[] = "mmtrain-checkpoint 1 xxh3-64 ";
constexpr size_t kTrailerSize = sizeof(kTrailerPrefix) - 1 + 16 + 7 + 20 + 1;  // 73

/// The trailer line of `archive` (see checkpoint.h).
std::string Trailer(const std::string& archive) {
  char size[32];
  std::snprintf(size, sizeof size, " bytes %020" PRIu64 "\n",
                static_cast<uint64_t>(archive.size()));
  return kTrailerPrefix + Xxh3Hex(archive.data(), archive.size()) + size;
}

/// Splits `file` into archive and trailer and checks them; throws naming `path`.
std::string VerifiedArchive(std::string file, const std::string& path) {
  const std::string refused = "checkpoint " + path + " ";
  if (file.size() < kTrailerSize ||
      file.compare(file.size() - kTrailerSize, sizeof(kTrailerPrefix) - 1, kTrailerPrefix) != 0) {
    throw std::runtime_error(refused +
                             "has no mmtrain checksum trailer: not an mmtrain checkpoint, cut "
                             "short, or written by an mmtrain before checksums");
  }
  const std::string trailer = file.substr(file.size() - kTrailerSize);
  file.resize(file.size() - kTrailerSize);
  if (Trailer(file) != trailer) {
    throw std::runtime_error(refused + "is damaged: its XXH3-64 or length does not match its " +
                             "trailer (" + trailer.substr(0, kTrailerSize - 1) + ")");
  }
  return file;
}

void WriteMeta(torch::serialize::OutputArchive& a, const CheckpointMeta& m) {
  a.write("meta/step", c10::IValue(m.step));
  a.write("meta/epoch", c10::IValue(m.epoch));
  a.write("meta/best_val", c10::IValue(m.best_val));
  a.write("meta/evals_since_best", c10::IValue(m.evals_since_best));
  a.write("meta/loader_state", c10::IValue(m.loader_state));
  a.write("meta/config", c10::IValue(m.config));
  a.write("meta/model_config", c10::IValue(m.model_config));
  a.write("meta/shards_identity", c10::IValue(m.shards_identity));
  a.write("meta/world_size", c10::IValue(m.world_size));
}

CheckpointMeta ReadMeta(torch::serialize::InputArchive& a) {
  CheckpointMeta m;
  c10::IValue v;
  a.read("meta/step", v);
  m.step = v.toInt();
  a.read("meta/epoch", v);
  m.epoch = v.toInt();
  a.read("meta/best_val", v);
  m.best_val = v.toDouble();
  a.read("meta/evals_since_best", v);
  m.evals_since_best = v.toInt();
  a.read("meta/loader_state", v);
  m.loader_state = v.toStringRef();
  a.read("meta/config", v);
  m.config = v.toStringRef();
  a.read("meta/model_config", v);
  m.model_config = v.toStringRef();
  a.read("meta/shards_identity", v);
  m.shards_identity = v.toStringRef();
  a.read("meta/world_size", v);
  m.world_size = v.toInt();
  return m;
}

}  // namespace

void SaveCheckpoint(const std::string& path, Coca& model, torch::optim::Optimizer& optimizer,
                    const LossScaler& scaler, const CheckpointMeta& meta) {
  torch::serialize::OutputArchive archive;
  torch::serialize::OutputArchive model_archive, optim_archive;
  model->save(model_archive);
  optimizer.save(optim_archive);
  archive.write("model", model_archive);
  archive.write("optimizer", optim_archive);
  auto scaler_state = scaler.State();
  archive.write("scaler/scale", scaler_state[0]);
  archive.write("scaler/growth_tracker", scaler_state[1]);
  archive.write("rng", at::detail::getDefaultCPUGenerator().get_state());
  WriteMeta(archive, meta);
  std::string bytes;
  archive.save_to([&bytes](const void* data, size_t n) {
    bytes.append(static_cast<const char*>(data), n);
    return n;
  });
  bytes += Trailer(bytes);
  WriteFileAtomically(path, bytes);
}

Checkpoint Checkpoint::Read(const std::string& path) {
  const uint64_t memory = PhysicalMemoryBytes();
  Checkpoint c;
  c.path_ = path;
  const int64_t limit = memory ? static_cast<int64_t>(memory / 2) : -1;
  c.archive_ = VerifiedArchive(ReadWholeFile(path, limit, "reading checkpoint"), path);
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(c.archive_.data(), c.archive_.size());
    c.meta_ = ReadMeta(archive);
  } catch (const std::exception& e) {
    throw std::runtime_error("checkpoint " + path + " cannot be parsed: " + e.what());
  }
  return c;
}

void Checkpoint::Restore(Coca& model, torch::optim::Optimizer& optimizer,
                         LossScaler& scaler) const {
  torch::serialize::InputArchive archive;
  archive.load_from(archive_.data(), archive_.size());
  torch::serialize::InputArchive model_archive, optim_archive;
  archive.read("model", model_archive);
  archive.read("optimizer", optim_archive);
  model->load(model_archive);
  optimizer.load(optim_archive);
  torch::Tensor scale, tracker, rng;
  archive.read("scaler/scale", scale);
  archive.read("scaler/growth_tracker", tracker);
  scaler.LoadState({scale, tracker});
  archive.read("rng", rng);
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(rng);
}

}  // namespace mm::train

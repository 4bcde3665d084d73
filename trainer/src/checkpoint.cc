#include "checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace mm::train {

namespace {

void FsyncPath(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

std::string DirName(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

void WriteMeta(torch::serialize::OutputArchive& a, const CheckpointMeta& m) {
  a.write("meta/step", c10::IValue(m.step));
  a.write("meta/epoch", c10::IValue(m.epoch));
  a.write("meta/best_val", c10::IValue(m.best_val));
  a.write("meta/evals_since_best", c10::IValue(m.evals_since_best));
  a.write("meta/loader_state", c10::IValue(m.loader_state));
  a.write("meta/config", c10::IValue(m.config));
  a.write("meta/model_config", c10::IValue(m.model_config));
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

  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  try {
    archive.save_to(tmp);
  } catch (const std::exception& e) {
    std::remove(tmp.c_str());
    throw std::runtime_error("cannot write checkpoint " + tmp + ": " + e.what());
  }
  FsyncPath(tmp);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = std::strerror(errno);
    std::remove(tmp.c_str());
    throw std::runtime_error("cannot rename " + tmp + " to " + path + ": " + err);
  }
  FsyncPath(DirName(path));
}

CheckpointMeta ReadCheckpointMeta(const std::string& path) {
  torch::serialize::InputArchive archive;
  archive.load_from(path);
  return ReadMeta(archive);
}

CheckpointMeta LoadCheckpoint(const std::string& path, Coca& model,
                              torch::optim::Optimizer& optimizer, LossScaler& scaler) {
  torch::serialize::InputArchive archive;
  archive.load_from(path);
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
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(rng);
  }
  return ReadMeta(archive);
}

}  // namespace mm::train

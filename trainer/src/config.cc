#include "config.h"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "mm/reader.h"

namespace mm::train {

AmpMode ParseAmp(const std::string& s) {
  if (s == "off") return AmpMode::kOff;
  if (s == "bf16") return AmpMode::kBf16;
  if (s == "fp16") return AmpMode::kFp16;
  throw std::invalid_argument("--amp must be off, bf16 or fp16, not '" + s + "'");
}

const char* AmpName(AmpMode m) {
  switch (m) {
    case AmpMode::kOff:
      return "off";
    case AmpMode::kBf16:
      return "bf16";
    case AmpMode::kFp16:
      return "fp16";
  }
  return "?";
}

Augment ParseAugment(const std::string& s) {
  if (s == "none") return Augment::kNone;
  if (s == "rrc") return Augment::kRandomResizedCrop;
  throw std::invalid_argument("--augment must be rrc or none, not '" + s + "'");
}

const char* AugmentName(Augment a) { return a == Augment::kRandomResizedCrop ? "rrc" : "none"; }

std::string TrainConfig::ToJson() const {
  nlohmann::json j = {{"shards", shards},
                      {"val_shards", val_shards},
                      {"out", out},
                      {"preset", preset},
                      {"dim", dim},
                      {"layers", layers},
                      {"heads", heads},
                      {"patch", patch},
                      {"loss_weights", {w_contrastive, w_caption}},
                      {"local_loss", local_loss},
                      {"amp", AmpName(amp)},
                      {"device", device},
                      {"batch_size", batch_size},
                      {"accum_steps", accum_steps},
                      {"steps", steps},
                      {"epochs", epochs},
                      {"lr", lr},
                      {"weight_decay", weight_decay},
                      {"warmup", warmup},
                      {"clip_grad", clip_grad},
                      {"seed", seed},
                      {"shuffle", shuffle},
                      {"shuffle_mode", shuffle_mode},
                      {"shuffle_window", shuffle_window},
                      {"log_every", log_every},
                      {"eval_every", eval_every},
                      {"save_every", save_every},
                      {"patience", patience},
                      {"eval_max", eval_max},
                      {"augment", AugmentName(augment)}};
  return j.dump();
}

void TrainConfig::SetFromJson(const std::string& json) {
  const auto j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) throw std::invalid_argument("a run config is not a JSON object: " + json);
  auto set = [&j](const char* key, auto& field) {
    if (j.contains(key)) field = j.at(key).get<std::decay_t<decltype(field)>>();
  };
  std::string amp_name = AmpName(amp), augment_name = AugmentName(augment);
  try {
    set("shards", shards), set("val_shards", val_shards), set("out", out);
    set("preset", preset), set("dim", dim), set("layers", layers), set("heads", heads);
    set("patch", patch), set("local_loss", local_loss), set("amp", amp_name);
    set("device", device);
    set("batch_size", batch_size), set("accum_steps", accum_steps), set("steps", steps);
    set("epochs", epochs), set("lr", lr), set("weight_decay", weight_decay);
    set("warmup", warmup), set("clip_grad", clip_grad), set("seed", seed);
    set("shuffle", shuffle), set("shuffle_mode", shuffle_mode);
    set("shuffle_window", shuffle_window), set("log_every", log_every),
        set("eval_every", eval_every);
    set("save_every", save_every), set("patience", patience), set("eval_max", eval_max);
    set("augment", augment_name);
    if (j.contains("loss_weights")) {
      w_contrastive = j.at("loss_weights").at(0).get<double>();
      w_caption = j.at("loss_weights").at(1).get<double>();
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument("a run config has a field of the wrong type: " +
                                std::string(e.what()));
  }
  amp = ParseAmp(amp_name);
  augment = ParseAugment(augment_name);
}

bool TrainConfig::Given(const std::string& flag) const {
  return std::find(given.begin(), given.end(), flag) != given.end();
}

std::string ModelConfig::ToJson() const {
  nlohmann::json j = {{"dim", dim},
                      {"layers", layers},
                      {"heads", heads},
                      {"patch", patch},
                      {"image_size", image_size},
                      {"vocab_size", vocab_size},
                      {"max_tokens", max_tokens},
                      {"embed_dim", embed_dim},
                      {"mlp_ratio", mlp_ratio}};
  return j.dump();
}

ModelConfig MakeModelConfig(const TrainConfig& c, const reader::SetInfo& info) {
  ModelConfig m;
  if (c.preset == "gpu") {
    m.dim = 512, m.layers = 6, m.heads = 8, m.patch = 16, m.embed_dim = 512;
  } else if (c.preset != "cpu") {
    throw std::invalid_argument("--preset must be cpu or gpu, not '" + c.preset + "'");
  }
  if (c.dim) m.dim = m.embed_dim = c.dim;
  if (c.layers) m.layers = c.layers;
  if (c.heads) m.heads = c.heads;
  if (c.patch) m.patch = c.patch;
  if (info.image_height != info.image_width) {
    throw std::invalid_argument("the model needs square images; the shards hold " +
                                std::to_string(info.image_width) + "x" +
                                std::to_string(info.image_height));
  }
  m.image_size = info.image_height;
  m.vocab_size = info.vocab_size;
  m.max_tokens = std::max(info.max_tokens, 2);
  if (m.vocab_size <= 0) throw std::invalid_argument("the shard index has no vocab_size");
  if (m.image_size % m.patch != 0) {
    throw std::invalid_argument("--patch " + std::to_string(m.patch) +
                                " does not divide the image size " + std::to_string(m.image_size));
  }
  return m;
}

namespace {

void CheckRange(const char* flag, int64_t value, int64_t lo, int64_t hi,
                const std::string& why = "") {
  if (value >= lo && value <= hi) return;
  throw std::invalid_argument(std::string(flag) + " " + std::to_string(value) + " is outside [" +
                              std::to_string(lo) + ", " + std::to_string(hi) + "]" + why);
}

std::string Gigabytes(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GB", bytes / 1e9);
  return buf;
}

}  // namespace

void CheckLimits(const TrainConfig& c, int cpus) {
  CheckRange("--batch-size", c.batch_size, 1, kMaxBatchSize);
  CheckRange("--accum-steps", c.accum_steps, 1, kMaxAccumSteps);
  CheckRange("--threads", c.threads, 0, cpus,
             ": this process may run on " + std::to_string(cpus) + " CPU(s)");
  if (c.loader_threads != 0) {  // 0: one per CPU available (the reader's default)
    CheckRange("--loader-threads", c.loader_threads, 1, kMaxLoaderThreads,
               " (0: one per CPU available)");
  }
  CheckRange("--prefetch", c.prefetch, 1, kMaxPrefetch);
}

void CheckStepMemory(const TrainConfig& c, uint64_t image_bytes, uint64_t memory_bytes) {
  if (memory_bytes == 0) return;  // unknown
  const double batch = static_cast<double>(c.batch_size) * static_cast<double>(image_bytes);
  const double need = batch * (4.0 * c.accum_steps + c.prefetch);
  if (need <= memory_bytes / 2.0) return;
  throw std::invalid_argument(
      "--accum-steps " + std::to_string(c.accum_steps) + " x --batch-size " +
      std::to_string(c.batch_size) + " (+ --prefetch " + std::to_string(c.prefetch) + ") hold " +
      Gigabytes(need) + " of images a step, more than half of this machine's " +
      Gigabytes(static_cast<double>(memory_bytes)));
}

int AvailableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

}  // namespace mm::train

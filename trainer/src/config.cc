#include "config.h"

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "mm/reader.h"

namespace mm::train {

std::string TrainConfig::ToJson() const {
  nlohmann::json j = {{"shards", shards},
                      {"val_shards", val_shards},
                      {"preset", preset},
                      {"dim", dim},
                      {"layers", layers},
                      {"heads", heads},
                      {"patch", patch},
                      {"loss_weights", {w_contrastive, w_caption}},
                      {"amp", amp},
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
                      {"shuffle", shuffle}};
  return j.dump();
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

}  // namespace mm::train

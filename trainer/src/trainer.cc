#include "trainer.h"

#include <sys/stat.h>
#include <time.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <unordered_set>

#include "amp.h"
#include "checkpoint.h"
#include "distributed.h"
#include "mm/reader.h"

namespace mm::train {

namespace {

using Clock = std::chrono::steady_clock;
using reader::BatchPtr;

/// CPU time of the whole process (all threads, the reader's included), seconds.
double ProcessCpuSeconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// The one place a reader Status becomes an exception.
void Check(const Status& st, const std::string& what) {
  if (!st.ok()) throw std::runtime_error(what + ": " + st.ToString());
}
template <typename T>
T Take(Result<T> r, const std::string& what) {
  Check(r.status(), what);
  return std::move(r).value();
}

// CLIP's image normalisation (Radford et al. 2021), RGB.
constexpr double kMean[3] = {0.48145466, 0.4578275, 0.40821073};
constexpr double kStd[3] = {0.26862954, 0.26130258, 0.27577711};

/// A batch as tensors on the training device.
struct DeviceBatch {
  torch::Tensor images;   // [B,3,H,W] float32, normalised
  torch::Tensor tokens;   // [B,L] int64
  torch::Tensor lengths;  // [B] int64
  std::vector<int64_t> indices;
  int64_t caption_tokens = 0;  // predicted tokens: sum(max(len-1, 0))
};

DeviceBatch ToDevice(const reader::Batch& b, const torch::Device& device, int64_t max_tokens) {
  DeviceBatch d;
  auto img = torch::from_blob(const_cast<uint8_t*>(b.images.data()), {b.size, b.height, b.width, 3},
                              torch::kUInt8);
  // uint8 crosses to the device (4x fewer bytes than float), then is normalised there.
  img = img.to(device, /*non_blocking=*/false, /*copy=*/true).permute({0, 3, 1, 2});
  auto opts = torch::TensorOptions().dtype(torch::kFloat).device(device);
  auto mean = torch::tensor({kMean[0], kMean[1], kMean[2]}, opts).view({1, 3, 1, 1});
  auto stdv = torch::tensor({kStd[0], kStd[1], kStd[2]}, opts).view({1, 3, 1, 1});
  d.images = ((img.to(torch::kFloat) / 255.0 - mean) / stdv).contiguous();
  const int64_t l = std::min<int64_t>(b.max_length, max_tokens);
  auto tok =
      torch::from_blob(const_cast<int32_t*>(b.tokens.data()), {b.size, b.max_length}, torch::kInt);
  d.tokens = tok.slice(1, 0, std::max<int64_t>(l, 1)).to(torch::kLong).to(device);
  auto len = torch::from_blob(const_cast<int32_t*>(b.lengths.data()), {b.size}, torch::kInt);
  d.lengths = len.to(torch::kLong).clamp(1, std::max<int64_t>(l, 1)).to(device);
  d.indices = b.indices;
  d.caption_tokens = CaptionTokenCount(d.lengths.cpu());
  return d;
}

double LearningRate(const TrainConfig& c, int64_t step, int64_t total, int64_t warmup) {
  if (step < warmup) return c.lr * static_cast<double>(step + 1) / warmup;
  const double span = std::max<int64_t>(1, total - warmup);
  const double progress = std::min(1.0, static_cast<double>(step - warmup) / span);
  return c.lr * 0.5 * (1.0 + std::cos(M_PI * progress));
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

/// This rank's stream of micro-batches across epochs.
class BatchStream {
 public:
  BatchStream(std::unique_ptr<reader::Loader> loader) : loader_(std::move(loader)) {}
  /// Next batch, starting the next epoch at the end of one. Adds the time blocked to *wait_s.
  BatchPtr Next(double* wait_s) {
    auto t0 = Clock::now();
    auto b = Take(loader_->Next(), "reading a training batch");
    if (!b) {
      loader_->StartEpoch(++epoch_);
      b = Take(loader_->Next(), "reading a training batch");
      if (!b) throw std::runtime_error("the training set yields no batch in an epoch");
    }
    epoch_ = b->epoch;
    *wait_s += Seconds(t0, Clock::now());
    return b;
  }
  reader::LoaderState state() const { return loader_->state(); }
  void Restore(const std::string& json) {
    auto st = Take(reader::LoaderState::FromJson(json), "checkpoint loader state");
    Check(loader_->Restore(st), "restoring the loader");
    epoch_ = st.epoch;
  }
  reader::Loader& loader() { return *loader_; }

 private:
  std::unique_ptr<reader::Loader> loader_;
  int64_t epoch_ = 0;
};

struct EvalResult {
  double caption_loss = 0, perplexity = 0;
  int64_t n = 0;
  double i2t[3] = {0, 0, 0}, t2i[3] = {0, 0, 0};  // recall@1,5,10
};

/// Captioning loss and perplexity, and retrieval recall@k over the val set (one caption per
/// image, the loader's seeded choice). Every rank evaluates the whole set (so no rank waits
/// on a collective meanwhile); they get identical results.
EvalResult Evaluate(Coca& model, const std::shared_ptr<reader::ShardSet>& set, const TrainConfig& c,
                    AmpMode amp, const torch::Device& device) {
  torch::NoGradGuard no_grad;
  reader::LoaderOptions lo;
  lo.batch_size = static_cast<int>(std::min<int64_t>(c.batch_size, set->num_samples()));
  lo.shuffle = false;
  lo.seed = 1234;  // the val captions are fixed across evaluations and runs
  lo.drop_last = false;
  lo.num_threads = c.loader_threads;
  lo.prefetch_batches = 2;
  auto loader = Take(reader::Loader::Create(set, lo), "opening the val loader");
  std::unordered_set<int64_t> seen;
  std::vector<torch::Tensor> img_emb, txt_emb;
  double ce_sum = 0;
  int64_t tokens = 0;
  const int64_t limit = c.eval_max > 0 ? c.eval_max : set->num_samples();
  while (static_cast<int64_t>(seen.size()) < limit) {
    auto b = Take(loader->Next(), "reading a val batch");
    if (!b) break;
    auto d = ToDevice(*b, device, model->config().max_tokens);
    std::vector<int64_t> keep;
    for (int i = 0; i < b->size; ++i) {
      if (static_cast<int64_t>(seen.size()) >= limit) break;
      if (seen.insert(b->indices[i]).second) keep.push_back(i);
    }
    if (keep.empty()) continue;
    auto idx = torch::tensor(keep, torch::kLong).to(device);
    auto images = d.images.index_select(0, idx), toks = d.tokens.index_select(0, idx);
    auto lens = d.lengths.index_select(0, idx);
    AutocastScope autocast(amp, device);
    auto out = model->forward(images, toks, lens);
    ce_sum += CaptionLossSum(out.logits, toks, lens).item<double>();
    tokens += CaptionTokenCount(lens.cpu());
    img_emb.push_back(out.image_embed.cpu());
    txt_emb.push_back(out.text_embed.cpu());
  }
  EvalResult r;
  if (img_emb.empty()) return r;
  r.caption_loss = ce_sum / std::max<int64_t>(tokens, 1);
  r.perplexity = std::exp(r.caption_loss);
  auto im = torch::cat(img_emb), tx = torch::cat(txt_emb);
  r.n = im.size(0);
  auto sim = torch::matmul(im, tx.t());  // [N,N]: image i vs caption j; the match is j == i
  auto recall = [&](const torch::Tensor& s, double* out) {
    auto diag = s.diagonal().unsqueeze(1);  // [N,1]
    auto rank = (s > diag).sum(1);          // items scored above the match
    const int ks[3] = {1, 5, 10};
    for (int i = 0; i < 3; ++i) out[i] = (rank < ks[i]).to(torch::kDouble).mean().item<double>();
  };
  recall(sim, r.i2t);
  recall(sim.t(), r.t2i);
  return r;
}

void MakeDirs(const std::string& dir) {
  std::string cur;
  std::stringstream ss(dir);
  std::string part;
  if (!dir.empty() && dir[0] == '/') cur = "/";
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    cur += part + "/";
    if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) {
      throw std::runtime_error("cannot create directory " + cur + ": " + std::strerror(errno));
    }
  }
}

std::string WithRankSuffix(const std::string& path, const Distributed& dist) {
  return dist.enabled() ? path + ".rank" + std::to_string(dist.rank()) : path;
}

}  // namespace

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
                      {"shuffle", shuffle},
                      {"shuffle_mode", shuffle_mode},
                      {"shuffle_window", shuffle_window},
                      {"cache_limit", cache_limit}};
  return j.dump();
}

int RankFromEnvironment() {
  try {
    return ReadDistEnv().rank;
  } catch (const std::exception&) {
    return 0;
  }
}

void Train(const TrainConfig& c) {
  if (c.batch_size < 1) throw std::invalid_argument("--batch-size must be >= 1");
  if (c.accum_steps < 1) throw std::invalid_argument("--accum-steps must be >= 1");
  if (c.threads > 0) torch::set_num_threads(c.threads);

  const DistEnv env = ReadDistEnv();
  torch::Device device(c.device);
  if (device.is_cuda() && !device.has_index()) device = torch::Device(torch::kCUDA, env.local_rank);
  if (device.is_cuda() && !torch::cuda::is_available()) {
    throw std::invalid_argument("--device " + c.device + ": this LibTorch has no CUDA device");
  }
  const AmpMode amp = ParseAmp(c.amp);
  CheckAmpSupported(amp, device);
  Distributed dist(env, device,
                   std::chrono::milliseconds(static_cast<int64_t>(c.dist_timeout_s * 1000)));
  const bool lead = dist.rank() == 0;
  const int world = dist.world_size();

  reader::OpenOptions open;  // remote sets: their cache (local sets ignore it)
  open.remote.cache_dir = c.cache_dir;
  open.remote.cache_limit = c.cache_limit;
  auto set = Take(reader::ShardSet::Open(c.shards, open), "opening --shards " + c.shards);
  std::shared_ptr<reader::ShardSet> val_set;
  if (!c.val_shards.empty()) {
    val_set =
        Take(reader::ShardSet::Open(c.val_shards, open), "opening --val-shards " + c.val_shards);
    if (val_set->info().vocab_size != set->info().vocab_size ||
        val_set->info().tokenizer_sha256 != set->info().tokenizer_sha256) {
      throw std::invalid_argument(
          "--val-shards were tokenized with another tokenizer than --shards");
    }
  }

  CheckpointMeta resume_meta;
  ModelConfig mc = MakeModelConfig(c, set->info());
  if (!c.resume.empty()) {
    resume_meta = ReadCheckpointMeta(c.resume);
    if (resume_meta.model_config != mc.ToJson()) {
      throw std::invalid_argument("--resume " + c.resume + " holds a model " +
                                  resume_meta.model_config + ", this run builds " + mc.ToJson());
    }
  }

  torch::manual_seed(c.seed);
  Coca model(mc);
  model->to(device);
  std::vector<torch::Tensor> params = model->parameters();
  dist.Broadcast(params);  // every rank starts from rank 0's initialisation

  // AdamW; no weight decay on biases, norms, positional/cls embeddings and the temperature.
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& np : model->named_parameters()) {
    const auto& name = np.key();
    const bool nd = np.value().dim() < 2 || name.find("pos") != std::string::npos ||
                    name.find("cls") != std::string::npos;
    (nd ? no_decay : decay).push_back(np.value());
  }
  torch::optim::AdamWOptions ao(c.lr);
  ao.betas({0.9, 0.98}).eps(1e-6).weight_decay(c.weight_decay);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(ao));
  auto nd_opts = std::make_unique<torch::optim::AdamWOptions>(ao);
  nd_opts->weight_decay(0.0);
  groups.emplace_back(no_decay, std::move(nd_opts));
  torch::optim::AdamW optimizer(std::move(groups), ao);
  LossScaler scaler(amp == AmpMode::kFp16, device);

  reader::LoaderOptions lo;
  lo.batch_size = c.batch_size;
  lo.shuffle = c.shuffle;
  lo.shuffle_mode = Take(reader::ParseShuffleMode(c.shuffle_mode), "--shuffle");
  lo.shuffle_window = c.shuffle_window;
  lo.seed = c.seed;
  lo.rank = dist.rank();
  lo.world_size = world;
  lo.drop_last = true;
  lo.caption_mode = reader::CaptionMode::kRandomCaption;  // one caption per image: InfoNCE
                                                          // needs distinct images per batch
  lo.num_threads = c.loader_threads;
  lo.prefetch_batches = c.prefetch;
  BatchStream stream(Take(reader::Loader::Create(set, lo), "creating the training loader"));
  if (lead && !stream.loader().notice().empty()) {
    std::fprintf(stderr, "mmtrain: %s\n", stream.loader().notice().c_str());
  }
  const int64_t micro_per_epoch = stream.loader().batches_per_epoch();
  const int64_t steps_per_epoch = std::max<int64_t>(1, micro_per_epoch / c.accum_steps);
  const int64_t total_steps = c.steps > 0 ? c.steps : c.epochs * steps_per_epoch;
  const int64_t warmup = c.warmup >= 0 ? c.warmup : std::max<int64_t>(1, total_steps / 20);

  int64_t step = 0;
  double best_val = 1e30;
  int64_t evals_since_best = 0;
  if (!c.resume.empty()) {
    auto meta = LoadCheckpoint(c.resume, model, optimizer, scaler);
    step = meta.step;
    best_val = meta.best_val;
    evals_since_best = meta.evals_since_best;
    stream.Restore(meta.loader_state);
    if (lead) std::cout << "resumed from " << c.resume << " at step " << step << std::endl;
  }
  std::unique_ptr<GradReducer> reducer;
  if (dist.enabled()) reducer = std::make_unique<GradReducer>(params, dist);

  std::ofstream metrics;
  if (lead && !c.out.empty()) {
    MakeDirs(c.out);
    metrics.open(c.out + "/metrics.jsonl", std::ios::app);
    if (!metrics) throw std::runtime_error("cannot open " + c.out + "/metrics.jsonl");
  }
  auto emit = [&](const nlohmann::json& j) {
    if (metrics.is_open()) metrics << j.dump() << "\n" << std::flush;
  };
  int64_t num_params = 0;
  for (const auto& p : params) num_params += p.numel();
  if (lead) {
    std::cout << "mmtrain: " << set->num_samples() << " train samples, vocab " << mc.vocab_size
              << ", model " << mc.ToJson() << " (" << num_params << " parameters), world " << world
              << " (" << env.source << "), device " << device.str() << ", amp " << AmpName(amp)
              << ", " << total_steps << " steps of " << c.batch_size << " x " << c.accum_steps
              << " x " << world << " samples" << std::endl;
    emit({{"event", "start"},
          {"config", nlohmann::json::parse(c.ToJson())},
          {"model", nlohmann::json::parse(mc.ToJson())},
          {"parameters", num_params},
          {"world_size", world},
          {"train_samples", set->num_samples()}});
  }

  auto save = [&](const std::string& path) {
    if (!lead || c.out.empty()) return;
    CheckpointMeta m;
    m.step = step;
    m.epoch = stream.state().epoch;
    m.best_val = best_val;
    m.evals_since_best = evals_since_best;
    m.loader_state = stream.state().ToJson();
    m.config = c.ToJson();
    m.model_config = mc.ToJson();
    SaveCheckpoint(path, model, optimizer, scaler, m);
  };
  auto ckpt_name = [&](int64_t s) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "/checkpoint-%06lld.pt", static_cast<long long>(s));
    return c.out + buf;
  };

  // Running sums over a log window.
  double win_wait = 0, win_time = 0, win_loss = 0, win_con = 0, win_cap = 0;
  int64_t win_steps = 0, win_samples = 0;
  double all_wait = 0, all_time = 0;
  int64_t all_samples = 0, steps_run = 0;
  double last_loss = 0, first_cap = -1, last_cap = 0;
  EvalResult last_eval;
  bool stopped_early = false;
  const auto run_start = Clock::now();
  const double cpu_start = ProcessCpuSeconds();
  std::vector<DeviceBatch> cached_micro;  // --reuse-batches

  while (step < total_steps) {
    const auto t0 = Clock::now();
    double wait = 0;
    // The step's K micro-batches, fetched first: the caption-loss normaliser N needs their
    // token counts before any backward pass.
    std::vector<BatchPtr> held;
    std::vector<DeviceBatch> micro;
    int64_t local_tokens = 0;
    if (c.reuse_batches && !cached_micro.empty()) {
      micro = cached_micro;
    } else {
      for (int k = 0; k < c.accum_steps; ++k) {
        held.push_back(stream.Next(&wait));
        micro.push_back(ToDevice(*held.back(), device, mc.max_tokens));
      }
      held.clear();  // buffers go back to the loader's pool
      if (c.reuse_batches) cached_micro = micro;
    }
    for (const auto& m : micro) local_tokens += m.caption_tokens;
    // stats: [global tokens, contrastive sum, caption CE sum]
    auto stats = torch::zeros({3}, torch::kDouble);
    stats[0] = static_cast<double>(local_tokens);
    torch::Tensor tok_t = stats.slice(0, 0, 1).clone();
    dist.AllReduceSum(tok_t);
    const double global_tokens = std::max(1.0, tok_t.item<double>());

    optimizer.zero_grad();
    double con_sum = 0, cap_sum = 0;
    for (int k = 0; k < c.accum_steps; ++k) {
      const auto& d = micro[k];
      torch::Tensor con, cap;
      {
        AutocastScope autocast(amp, device);
        auto out = model->forward(d.images, d.tokens, d.lengths);
        con = ContrastiveLoss(out.image_embed, out.text_embed, out.logit_scale);
        cap = CaptionLossSum(out.logits, d.tokens, d.lengths);
      }
      auto loss =
          con * (c.w_contrastive / c.accum_steps) + cap * (c.w_caption * world / global_tokens);
      if (reducer && k == c.accum_steps - 1) reducer->PrepareForBackward({loss});
      scaler.Scale(loss).backward();
      con_sum += con.item<double>();
      cap_sum += cap.item<double>();
    }
    micro.clear();
    scaler.Unscale(params);
    if (!c.dump_grads.empty() && step == 0 && c.resume.empty()) {
      std::vector<torch::Tensor> grads;
      for (const auto& p : params) grads.push_back(p.grad().detach().clone().cpu());
      torch::save(grads, WithRankSuffix(c.dump_grads, dist));
    }
    double grad_norm = 0;
    if (c.clip_grad > 0) {
      grad_norm = torch::nn::utils::clip_grad_norm_(params, c.clip_grad);
    }
    const double lr = LearningRate(c, step, total_steps, warmup);
    for (auto& g : optimizer.param_groups()) {
      static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
    }
    if (scaler.StepIsFinite()) optimizer.step();
    scaler.Update();
    ++step;
    ++steps_run;

    // Loss as the whole world saw it: mean InfoNCE over micro-batches and ranks, caption CE
    // per token over the global batch.
    stats[0] = 0;
    stats[1] = con_sum / c.accum_steps;
    stats[2] = cap_sum;
    dist.AllReduceSum(stats);
    const double con_mean = stats[1].item<double>() / world;
    const double cap_mean = stats[2].item<double>() / global_tokens;
    const double loss = c.w_contrastive * con_mean + c.w_caption * cap_mean;
    if (!std::isfinite(loss) && amp != AmpMode::kFp16) {
      throw std::runtime_error("loss is " + std::to_string(loss) + " at step " +
                               std::to_string(step));
    }
    if (first_cap < 0) first_cap = cap_mean;
    last_cap = cap_mean;
    last_loss = loss;

    const double step_time = Seconds(t0, Clock::now());
    const int64_t samples = static_cast<int64_t>(c.batch_size) * c.accum_steps * world;
    win_wait += wait, win_time += step_time, win_loss += loss, win_con += con_mean,
        win_cap += cap_mean, win_steps += 1, win_samples += samples;
    all_wait += wait, all_time += step_time, all_samples += samples;

    if (c.log_every > 0 && (step % c.log_every == 0 || step == total_steps) && lead) {
      const double sps = win_samples / std::max(win_time, 1e-9);
      const double wait_pct = 100.0 * win_wait / std::max(win_time, 1e-9);
      if (!c.quiet) {
        std::printf(
            "step %6lld/%lld  loss %.4f (contrastive %.4f caption %.4f)  lr %.3e  %.1f samples/s  "
            "data-wait %.1f%%%s\n",
            static_cast<long long>(step), static_cast<long long>(total_steps), win_loss / win_steps,
            win_con / win_steps, win_cap / win_steps, lr, sps, wait_pct,
            scaler.enabled() ? ("  scale " + std::to_string(scaler.scale())).c_str() : "");
        std::fflush(stdout);
      }
      emit({{"event", "train"},
            {"step", step},
            {"loss", win_loss / win_steps},
            {"contrastive", win_con / win_steps},
            {"caption", win_cap / win_steps},
            {"lr", lr},
            {"grad_norm", grad_norm},
            {"samples_per_s", sps},
            {"data_wait_pct", wait_pct},
            {"epoch", stream.state().epoch},
            {"loss_scale", scaler.scale()}});
      win_wait = win_time = win_loss = win_con = win_cap = 0;
      win_steps = win_samples = 0;
    }

    if (val_set && c.eval_every > 0 && (step % c.eval_every == 0 || step == total_steps)) {
      const auto e0 = Clock::now();
      last_eval = Evaluate(model, val_set, c, amp, device);
      if (lead) {
        const double n = static_cast<double>(last_eval.n);
        std::printf(
            "eval  %6lld  val caption loss %.4f  ppl %.1f  i2t R@1/5/10 %.3f/%.3f/%.3f  t2i "
            "R@1/5/10 %.3f/%.3f/%.3f  (chance %.3f/%.3f/%.3f, N=%lld)  %.1fs\n",
            static_cast<long long>(step), last_eval.caption_loss, last_eval.perplexity,
            last_eval.i2t[0], last_eval.i2t[1], last_eval.i2t[2], last_eval.t2i[0],
            last_eval.t2i[1], last_eval.t2i[2], std::min(1.0, 1 / n), std::min(1.0, 5 / n),
            std::min(1.0, 10 / n), static_cast<long long>(last_eval.n), Seconds(e0, Clock::now()));
        std::fflush(stdout);
        emit({{"event", "eval"},
              {"step", step},
              {"caption_loss", last_eval.caption_loss},
              {"perplexity", last_eval.perplexity},
              {"n", last_eval.n},
              {"i2t_r1", last_eval.i2t[0]},
              {"i2t_r5", last_eval.i2t[1]},
              {"i2t_r10", last_eval.i2t[2]},
              {"t2i_r1", last_eval.t2i[0]},
              {"t2i_r5", last_eval.t2i[1]},
              {"t2i_r10", last_eval.t2i[2]},
              {"chance_r1", std::min(1.0, 1 / n)},
              {"chance_r5", std::min(1.0, 5 / n)},
              {"chance_r10", std::min(1.0, 10 / n)}});
      }
      if (last_eval.caption_loss < best_val) {
        best_val = last_eval.caption_loss;
        evals_since_best = 0;
      } else if (++evals_since_best >= c.patience && c.patience > 0) {
        if (lead)
          std::printf("early stop: no val improvement in %lld evaluations\n",
                      static_cast<long long>(c.patience));
        stopped_early = true;
      }
    }
    if (c.save_every > 0 && step % c.save_every == 0) save(ckpt_name(step));
    if (stopped_early) break;
    if (c.stop_after > 0 && step >= c.stop_after) break;
  }
  if (!c.out.empty()) save(c.out + "/checkpoint-last.pt");
  if (!c.dump_params.empty()) {
    std::vector<torch::Tensor> ps;
    for (const auto& p : params) ps.push_back(p.detach().cpu().clone());
    torch::save(ps, WithRankSuffix(c.dump_params, dist));
  }
  dist.Barrier();

  if (lead) {
    const double wall = Seconds(run_start, Clock::now());
    nlohmann::json s = {{"event", "summary"},
                        {"steps", step},
                        {"wall_s", wall},
                        {"samples", all_samples},
                        {"samples_per_s", all_samples / std::max(all_time, 1e-9)},
                        {"data_wait_pct", 100.0 * all_wait / std::max(all_time, 1e-9)},
                        {"cpu_ms_per_sample", 1000.0 * (ProcessCpuSeconds() - cpu_start) /
                                                  std::max<int64_t>(all_samples, 1)},
                        {"final_loss", last_loss},
                        {"first_caption_loss", first_cap},
                        {"final_caption_loss", last_cap},
                        {"stopped_early", stopped_early},
                        // This process's optimizer steps (steps minus a resumed start) and the
                        // gradient reductions they took: one round per step however many
                        // micro-batches (--accum-steps), each round one all-reduce per bucket.
                        {"steps_run", steps_run},
                        {"allreduce_rounds", reducer ? reducer->allreduce_rounds() : 0},
                        {"allreduce_buckets", reducer ? reducer->allreduce_buckets() : 0}};
    if (last_eval.n > 0) {
      s["val_caption_loss"] = last_eval.caption_loss;
      s["val_perplexity"] = last_eval.perplexity;
      s["val_i2t_r5"] = last_eval.i2t[1];
      s["val_t2i_r5"] = last_eval.t2i[1];
      s["val_n"] = last_eval.n;
      s["best_val_caption_loss"] = best_val;
    }
    std::printf(
        "done: %lld steps in %.1f s, %.1f samples/s, data-wait %.2f%%, caption loss %.4f -> "
        "%.4f\n",
        static_cast<long long>(step), wall, s["samples_per_s"].get<double>(),
        s["data_wait_pct"].get<double>(), first_cap, last_cap);
    std::fflush(stdout);
    emit(s);
    if (!c.out.empty()) {
      std::ofstream(c.out + "/summary.json") << s.dump(2) << "\n";
    }
  }
}

}  // namespace mm::train

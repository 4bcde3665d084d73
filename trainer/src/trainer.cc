#include "trainer.h"

#include <c10/core/impl/VirtualGuardImpl.h>
#include <time.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "files.h"
#include "optimizer.h"
#include "resume_plan.h"
#include "train.h"

namespace mm::train {

namespace {

/// CPU time of the whole process (all threads, the reader's included), seconds.
double ProcessCpuSeconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

std::string WithRankSuffix(const std::string& path, const Distributed& dist) {
  return dist.enabled() ? path + ".rank" + std::to_string(dist.rank()) : path;
}

std::string CheckpointName(const std::string& out, int64_t step) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "/checkpoint-%06lld.pt", static_cast<long long>(step));
  return out + buf;
}

/// Writes every parameter (or its gradient) of `params`, on the CPU, with torch::save.
void DumpTensors(const std::vector<torch::Tensor>& params, bool grads, const std::string& path) {
  std::vector<torch::Tensor> ts;
  for (const auto& p : params) ts.push_back((grads ? p.grad() : p).detach().clone().cpu());
  std::ostringstream bytes;
  torch::save(ts, bytes);
  WriteFileAtomically(path, bytes.str());
}

}  // namespace

int RankFromEnvironment() {
  try {
    return ReadDistEnv().rank;
  } catch (const std::exception&) {
    return 0;
  }
}

void Train(const TrainConfig& config) {
  Trainer trainer(config);
  trainer.Run();
}

// --- construction ---------------------------------------------------------------------------

Trainer::Trainer(const TrainConfig& given) : c_(given) {
  env_ = ReadDistEnv();
  if (!given.resume.empty()) PlanFromCheckpoint(given);
  CheckLimits(c_, AvailableCpus());
  if (c_.threads > 0) torch::set_num_threads(c_.threads);
  device_ = torch::Device(c_.device);
  if (device_.is_cuda() && !device_.has_index()) {
    device_ = torch::Device(torch::kCUDA, env_.local_rank);
  }
  if (device_.is_cuda() && !torch::cuda::is_available()) {
    throw std::invalid_argument("--device " + c_.device + ": this LibTorch has no CUDA device");
  }
  if (device_.is_cuda()) {
    if (device_.index() >= static_cast<int>(torch::cuda::device_count())) {
      throw std::invalid_argument("--device " + device_.str() + ": this machine has " +
                                  std::to_string(torch::cuda::device_count()) + " CUDA devices");
    }
    // This rank's GPU is the current device: NCCL's communicator, the side stream and pinned
    // memory all belong to it.
    c10::impl::VirtualGuardImpl(c10::DeviceType::CUDA).setDevice(device_);
  }
  amp_ = c_.amp;
  CheckAmpSupported(amp_, device_);
  dist_ = std::make_unique<Distributed>(
      env_, device_, std::chrono::milliseconds(static_cast<int64_t>(c_.dist_timeout_s * 1000)));
  lead_ = dist_->rank() == 0;
  OpenData();
  CheckResumeShards();
  CheckStepMemory(c_, set_->image_bytes(), PhysicalMemoryBytes());
  BuildModel();
  BuildOptimizer();
  CreateLoader();
  MaybeResume();
  feeder_ = std::make_unique<DeviceFeeder>(*stream_, device_, mc_.max_tokens, c_.accum_steps);
  if (lead_ && device_.is_cuda()) {
    gpu_ = std::make_unique<GpuMonitor>(device_.index());
    if (!gpu_->available()) {
      std::fprintf(stderr, "mmtrain: no GPU utilisation in the metrics: %s\n",
                   gpu_->unavailable_reason().c_str());
      gpu_.reset();
    }
  }
  if (dist_->enabled()) reducer_ = std::make_unique<GradReducer>(params_, *dist_);
  step_context_ = {model_,       dist_.get(),   reducer_.get(), scaler_.get(), c_.w_contrastive,
                   c_.w_caption, c_.local_loss, amp_,           device_};
  OpenMetrics();
}

Trainer::~Trainer() = default;

void Trainer::PlanFromCheckpoint(const TrainConfig& given) {
  resume_ = Checkpoint::Read(given.resume);
  const CheckpointMeta& meta = resume_->meta();
  ResumePlan plan =
      PlanResume(given, meta.config, meta.world_size, env_.world_size, meta.model_config);
  const std::string refused = DescribeRefused(plan.changes);
  if (!refused.empty() && !given.resume_override) {
    throw std::invalid_argument("--resume " + given.resume + ": " + refused +
                                " would change the optimisation; leave them out to continue as "
                                "saved, or add --resume-override");
  }
  c_ = plan.config;
  resume_changes_ = plan.changes;
}

void Trainer::OpenData() {
  reader::OpenOptions open;  // remote sets: their cache (local sets ignore it)
  open.remote.cache_dir = c_.cache_dir;
  open.remote.cache_limit = c_.cache_limit;
  set_ = Take(reader::ShardSet::Open(c_.shards, open), "opening --shards " + c_.shards);
  if (!set_->info().has_tokenizer) {
    throw std::invalid_argument("--shards " + c_.shards +
                                " holds no token ids (built with --tokenizer none); mmtrain "
                                "trains on token ids: build with --tokenizer MODEL");
  }
  if (c_.val_shards.empty()) return;
  val_set_ =
      Take(reader::ShardSet::Open(c_.val_shards, open), "opening --val-shards " + c_.val_shards);
  if (val_set_->info().vocab_size != set_->info().vocab_size ||
      val_set_->info().tokenizer_sha256 != set_->info().tokenizer_sha256) {
    throw std::invalid_argument("--val-shards were tokenized with another tokenizer than --shards");
  }
}

void Trainer::CheckResumeShards() const {
  if (!resume_) return;
  const std::string now = SetIdentity(set_->info()), then = resume_->meta().shards_identity;
  if (now == then) return;
  if (c_.resume_override) {
    if (lead_)
      std::cout << "resume: training set differs from the checkpoint's (--resume-override)\n";
    return;
  }
  throw std::invalid_argument("--shards " + c_.shards + " is not the training set of --resume " +
                              c_.resume + ": " + DescribeSet(now) + ", the checkpoint's " +
                              DescribeSet(then) + " (--resume-override trains on it anyway)");
}

void Trainer::BuildModel() {
  mc_ = MakeModelConfig(c_, set_->info());
  if (resume_ && resume_->meta().model_config != mc_.ToJson()) {
    throw std::invalid_argument("--resume " + c_.resume + " holds a model " +
                                resume_->meta().model_config + ", this run builds " + mc_.ToJson());
  }
  torch::manual_seed(c_.seed);
  model_ = Coca(mc_);
  model_->to(device_);
  params_ = model_->parameters();
  dist_->Broadcast(params_);  // every rank starts from rank 0's initialisation
}

void Trainer::BuildOptimizer() {
  optimizer_ = MakeAdamW(*model_, c_.lr, c_.weight_decay);
  scaler_ = std::make_unique<LossScaler>(amp_ == AmpMode::kFp16, device_);
}

void Trainer::CreateLoader() {
  reader::LoaderOptions lo;
  lo.batch_size = c_.batch_size;
  lo.shuffle = c_.shuffle;
  lo.shuffle_mode = Take(reader::ParseShuffleMode(c_.shuffle_mode), "--shuffle");
  lo.shuffle_window = c_.shuffle_window;
  lo.seed = c_.seed;
  lo.rank = dist_->rank();
  lo.world_size = dist_->world_size();
  lo.drop_last = true;
  // One caption per image: InfoNCE needs distinct images per batch.
  lo.caption_mode = reader::CaptionMode::kRandomCaption;
  lo.num_threads = c_.loader_threads;
  lo.prefetch_batches = c_.prefetch;
  if (c_.augment == Augment::kRandomResizedCrop) lo.crop = reader::ImageCrop::kRandomResized;
  stream_ = std::make_unique<BatchStream>(
      Take(reader::Loader::Create(set_, lo), "creating the training loader"));
  if (lead_ && !stream_->loader().notice().empty()) {
    std::fprintf(stderr, "mmtrain: %s\n", stream_->loader().notice().c_str());
  }
  const int64_t micro_per_epoch = stream_->loader().batches_per_epoch();
  const int64_t steps_per_epoch = std::max<int64_t>(1, micro_per_epoch / c_.accum_steps);
  total_steps_ = c_.steps > 0 ? c_.steps : c_.epochs * steps_per_epoch;
  warmup_ = c_.warmup >= 0 ? c_.warmup : std::max<int64_t>(1, total_steps_ / 20);
}

void Trainer::MaybeResume() {
  if (!resume_) return;
  resume_->Restore(model_, *optimizer_, *scaler_);
  const CheckpointMeta& meta = resume_->meta();
  step_ = meta.step;
  best_val_ = meta.best_val;
  evals_since_best_ = meta.evals_since_best;
  const bool same_set = SetIdentity(set_->info()) == meta.shards_identity;
  const int64_t epoch = stream_->Restore(meta.loader_state, same_set);
  if (lead_ && !same_set) {
    std::cout << "resume: the loader starts epoch " << epoch
              << " of --shards from its beginning (the checkpoint's positions are in another set)"
              << std::endl;
  }
  if (lead_) std::cout << "resumed from " << c_.resume << " at step " << step_ << std::endl;
  resumed_ = true;
  resume_.reset();  // frees the archive's bytes (as large as the model and its AdamW state)
}

void Trainer::OpenMetrics() {
  if (!lead_ || c_.out.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(c_.out, ec);
  if (ec) throw std::runtime_error("cannot create directory " + c_.out + ": " + ec.message());
  if (resumed_) {
    const int64_t moved =
        MoveLinesPastStep(c_.out + "/metrics.jsonl", c_.out + "/metrics.superseded.jsonl", step_);
    if (moved > 0) {
      std::cout << "resume: " << moved << " lines of " << c_.out << "/metrics.jsonl past step "
                << step_ << " moved to metrics.superseded.jsonl" << std::endl;
    }
  }
  metrics_.Open(c_.out + "/metrics.jsonl");
}

// --- the loop -------------------------------------------------------------------------------

void Trainer::LogStart() {
  if (!lead_) return;
  int64_t num_params = 0;
  for (const auto& p : params_) num_params += p.numel();
  const int world = dist_->world_size();
  std::cout << "mmtrain: " << set_->num_samples() << " train samples, vocab " << mc_.vocab_size
            << ", model " << mc_.ToJson() << " (" << num_params << " parameters), world " << world
            << " (" << env_.source << "), device " << device_.str() << ", amp " << AmpName(amp_)
            << ", " << total_steps_ << " steps of " << c_.batch_size << " x " << c_.accum_steps
            << " x " << world << " samples" << std::endl;
  nlohmann::json start = {{"event", resumed_ ? "resume" : "start"},
                          {"step", step_},
                          {"config", nlohmann::json::parse(c_.ToJson())},
                          {"model", nlohmann::json::parse(mc_.ToJson())},
                          {"parameters", num_params},
                          {"world_size", world},
                          {"train_samples", set_->num_samples()}};
  if (resumed_) {
    start["from"] = c_.resume;
    start["resume_override"] = c_.resume_override;
    start["changes"] = nlohmann::json::parse(ChangesToJson(resume_changes_));
    for (const auto& change : resume_changes_) {
      std::cout << "resume: " << DescribeChange(change) << "\n";
    }
  }
  metrics_.Emit(start);
}

void Trainer::Run() {
  LogStart();
  run_start_ = Clock::now();
  cpu_start_ = ProcessCpuSeconds();
  while (step_ < total_steps_) {
    MaybeLog(TrainStep());
    MaybeEvaluate();
    MaybeCheckpoint();
    if (stopped_early_) break;
    if (c_.stop_after > 0 && step_ >= c_.stop_after) break;
  }
  Finish();
}

StepStats Trainer::TrainStep() {
  const auto t0 = Clock::now();
  StepStats s;
  const int world = dist_->world_size();
  // The step's K micro-batches, fetched first: the caption-loss normaliser N needs their
  // token counts before any backward pass.
  std::vector<DeviceBatch> micro = FetchMicroBatches(&s.wait_s);
  int64_t local_tokens = 0;
  for (const auto& m : micro) local_tokens += m.caption_tokens;
  auto tokens = torch::full({1}, static_cast<double>(local_tokens), torch::kDouble);
  dist_->AllReduceSum(tokens);
  const double global_tokens = std::max(1.0, tokens.item<double>());

  optimizer_->zero_grad();
  const StepLosses losses = ForwardBackward(step_context_, micro, global_tokens);
  micro.clear();
  s.lr = LearningRate(c_.lr, step_, total_steps_, warmup_);
  ClipAndStep(&s);

  // Loss as the whole world saw it: InfoNCE of the global batch (with --local-loss the mean of
  // the ranks' row losses, the same number), caption CE per token of the global batch.
  auto stats = torch::zeros({3}, torch::kDouble);
  stats[1] = losses.contrastive;
  stats[2] = losses.caption_sum;
  dist_->AllReduceSum(stats);
  s.contrastive = stats[1].item<double>() / world;
  s.caption = stats[2].item<double>() / global_tokens;
  s.loss = c_.w_contrastive * s.contrastive + c_.w_caption * s.caption;
  if (!std::isfinite(s.loss) && amp_ != AmpMode::kFp16) {
    throw std::runtime_error("loss is " + std::to_string(s.loss) + " at step " +
                             std::to_string(step_));
  }
  if (first_caption_ < 0) first_caption_ = s.caption;
  last_caption_ = s.caption;
  last_loss_ = s.loss;
  s.time_s = Seconds(t0, Clock::now());
  s.samples = static_cast<int64_t>(c_.batch_size) * c_.accum_steps * world;
  return s;
}

std::vector<DeviceBatch> Trainer::FetchMicroBatches(double* wait_s) {
  if (c_.reuse_batches && !reused_micro_.empty()) return reused_micro_;
  std::vector<DeviceBatch> micro = feeder_->NextStep(wait_s);
  if (c_.reuse_batches) reused_micro_ = micro;
  return micro;
}

void Trainer::ClipAndStep(StepStats* s) {
  scaler_->Unscale(params_);
  if (!c_.dump_grads.empty() && step_ == 0 && c_.resume.empty()) {
    DumpTensors(params_, /*grads=*/true, WithRankSuffix(c_.dump_grads, *dist_));
  }
  s->grad_norm = 0;
  if (c_.clip_grad > 0) s->grad_norm = torch::nn::utils::clip_grad_norm_(params_, c_.clip_grad);
  for (auto& g : optimizer_->param_groups()) {
    static_cast<torch::optim::AdamWOptions&>(g.options()).lr(s->lr);
  }
  s->skipped = !scaler_->StepIsFinite();
  if (!s->skipped) optimizer_->step();
  scaler_->Update();
  ++step_;
  ++steps_run_;
}

void Trainer::MaybeLog(const StepStats& s) {
  window_.Add(s);
  run_.Add(s);
  if (c_.log_every <= 0 || !lead_) return;
  if (step_ % c_.log_every != 0 && step_ != total_steps_) return;
  if (gpu_) {
    window_.gpu = gpu_->TakeWindow();
    run_.gpu.Add(window_.gpu);
  }
  if (!c_.quiet) {
    PrintTrainLine(step_, total_steps_, window_, s.lr, scaler_->enabled(), scaler_->scale());
  }
  metrics_.Emit(TrainRecord(step_, window_, s, feeder_->state().epoch, scaler_->scale()));
  window_ = MetricsWindow{};
}

void Trainer::MaybeEvaluate() {
  // --eval-every 0: only at the end.
  if (!val_set_) return;
  if (step_ != total_steps_ && (c_.eval_every <= 0 || step_ % c_.eval_every != 0)) return;
  const auto t0 = Clock::now();
  EvalOptions eo;
  eo.batch_size = c_.batch_size;
  eo.loader_threads = c_.loader_threads;
  eo.max_samples = c_.eval_max;
  if (c_.augment == Augment::kRandomResizedCrop)
    eo.crop = reader::ImageCrop::kCenter;  // FFCV's 224/256 centre crop
  last_eval_ = Evaluate(model_, val_set_, eo, amp_, device_, *dist_);
  if (lead_) {
    PrintEvalLine(step_, last_eval_, Seconds(t0, Clock::now()));
    metrics_.Emit(EvalRecord(step_, last_eval_));
  }
  if (last_eval_.caption_loss < best_val_) {
    best_val_ = last_eval_.caption_loss;
    evals_since_best_ = 0;
  } else if (++evals_since_best_ >= c_.patience && c_.patience > 0) {
    if (lead_) {
      std::printf("early stop: no val improvement in %lld evaluations\n",
                  static_cast<long long>(c_.patience));
    }
    stopped_early_ = true;
  }
}

void Trainer::MaybeCheckpoint() {
  if (c_.save_every > 0 && step_ % c_.save_every == 0) {
    SaveCheckpointTo(CheckpointName(c_.out, step_));
  }
}

void Trainer::SaveCheckpointTo(const std::string& path) {
  if (!lead_ || c_.out.empty()) return;
  CheckpointMeta m;
  m.step = step_;
  m.epoch = feeder_->state().epoch;
  m.best_val = best_val_;
  m.evals_since_best = evals_since_best_;
  m.loader_state = feeder_->state().ToJson();  // the last batch trained on, not the reader's
  m.config = c_.ToJson();
  m.model_config = mc_.ToJson();
  m.shards_identity = SetIdentity(set_->info());
  m.world_size = dist_->world_size();
  SaveCheckpoint(path, model_, *optimizer_, *scaler_, m);
}

void Trainer::Finish() {
  if (!c_.out.empty()) SaveCheckpointTo(c_.out + "/checkpoint-last.pt");
  if (!c_.dump_params.empty()) {
    DumpTensors(params_, /*grads=*/false, WithRankSuffix(c_.dump_params, *dist_));
  }
  dist_->Barrier();
  if (!lead_) return;
  RunSummary r;
  r.step = step_, r.steps_run = steps_run_;
  r.wall_s = Seconds(run_start_, Clock::now());
  r.cpu_s = ProcessCpuSeconds() - cpu_start_;
  r.final_loss = last_loss_, r.first_caption = first_caption_, r.final_caption = last_caption_;
  r.stopped_early = stopped_early_;
  r.allreduce_rounds = reducer_ ? reducer_->allreduce_rounds() : 0;
  r.allreduce_buckets = reducer_ ? reducer_->allreduce_buckets() : 0;
  r.last_eval = last_eval_, r.best_val = best_val_;
  r.fp16 = scaler_->enabled(), r.loss_scale = scaler_->scale();
  if (gpu_) run_.gpu.Add(gpu_->TakeWindow());
  r.run = run_;
  PrintSummaryLine(r);
  const nlohmann::json s = SummaryRecord(r);
  metrics_.Emit(s);
  if (!c_.out.empty()) WriteFileAtomically(c_.out + "/summary.json", s.dump(2) + "\n");
}

}  // namespace mm::train

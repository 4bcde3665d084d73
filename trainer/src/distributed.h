// distributed.h: data-parallel training over c10d, as PyTorch's DistributedDataParallel does it.
//
// Rendezvous: rank and world size from the launcher's environment (torchrun, OpenMPI's mpirun,
// Slurm's srun), a TCPStore at MASTER_ADDR:MASTER_PORT (rank 0 serves it, unless torchrun's
// agent already does: TORCHELASTIC_USE_AGENT_STORE=True), then a Gloo process group (CPU) or
// NCCL (CUDA builds with MM_TRAIN_NCCL). Every collective and the rendezvous itself carry a
// timeout, so a dead rank makes the others fail with an error instead of hanging.
//
// Gradients: c10d::Reducer (the engine inside DistributedDataParallel) registers a hook on each
// parameter's gradient accumulator, packs ready gradients into ~25 MB buckets (the first ~1 MB,
// so communication starts early) and all-reduces each bucket while backward continues; the
// result is the mean over ranks. Without PrepareForBackward before a backward pass the hooks do
// nothing and gradients just accumulate locally (DDP's no_sync): that is how accumulation
// micro-steps other than the last skip communication.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace c10d {
class ProcessGroup;
class Reducer;
}  // namespace c10d

namespace mm::train {

/// Where this process sits in the job, as the launcher said.
struct DistEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool use_agent_store = false;  // torchrun hosts the TCPStore; rank 0 is a client
  int restart_count = 0;         // TORCHELASTIC_RESTART_COUNT: torchrun's restart attempt
  std::string source = "none";   // "torchrun" | "openmpi" | "slurm" | "none"
};

/// Reads the environment through `getenv` (std::getenv by default): first RANK/WORLD_SIZE
/// (torchrun or by hand), then OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK, then SLURM_PROCID/NTASKS/
/// LOCALID; MASTER_ADDR/MASTER_PORT in all cases (default 127.0.0.1:29500), and
/// TORCHELASTIC_USE_AGENT_STORE / TORCHELASTIC_RESTART_COUNT.
/// Throws std::invalid_argument on malformed or inconsistent values.
DistEnv ReadDistEnv(const std::function<const char*(const char*)>& getenv = nullptr);

/// A process group plus the few collectives the trainer needs. Not thread-safe.
class Distributed {
 public:
  /// world_size 1: no store, no group; collectives are no-ops.
  /// Throws c10::Error / std::runtime_error when the rendezvous fails or times out.
  Distributed(const DistEnv& env, const torch::Device& device, std::chrono::milliseconds timeout);
  ~Distributed();

  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  bool enabled() const { return env_.world_size > 1; }
  const DistEnv& env() const { return env_; }
  c10::intrusive_ptr<c10d::ProcessGroup> group() const;

  /// In-place sum over ranks of a dense tensor (copied to the group's device and back when it
  /// lies elsewhere: NCCL reduces GPU tensors only).
  void AllReduceSum(torch::Tensor& t);
  /// Every rank's `t` (same shape and dtype on all ranks), in rank order, on t's device; {t}
  /// without a group.
  std::vector<torch::Tensor> AllGather(const torch::Tensor& t);
  /// Copies rank 0's values of every tensor into all ranks (one flattened broadcast).
  void Broadcast(const std::vector<torch::Tensor>& tensors);
  void Barrier();

 private:
  DistEnv env_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Bucketed, backward-overlapped gradient all-reduce (c10d::Reducer). Averages over ranks.
/// The all-reduce is a communication hook of ours (the one DDP runs by default: scale by
/// 1/world, sum over ranks) that also counts what it sends, so the number of reductions is
/// observable, not just their result.
class GradReducer {
 public:
  /// `params`: the model's parameters in registration order (all dense, all requiring grad,
  /// all used in every forward pass: find_unused_parameters is off).
  GradReducer(std::vector<torch::Tensor> params, Distributed& dist, int64_t bucket_bytes = 25 << 20,
              int64_t first_bucket_bytes = 1 << 20);
  ~GradReducer();
  /// Call right before the backward pass whose gradients must be reduced (the last
  /// micro-step); `outputs` are the loss tensors. Skipping it makes backward purely local.
  /// A collective on its second call (the Reducer rebuilds its buckets in the order gradients
  /// became ready in the first armed backward, rank 0's order broadcast): every rank must call
  /// it at the same point.
  void PrepareForBackward(const std::vector<torch::Tensor>& outputs);

  /// Bucket all-reduces launched so far (each one collective of one bucket over all ranks).
  int64_t allreduce_buckets() const;
  /// Complete reduction rounds so far: backward passes whose every bucket was all-reduced
  /// (counted when the last bucket is launched).
  int64_t allreduce_rounds() const;

  struct Counters;

 private:
  std::shared_ptr<Counters> counters_;
  std::unique_ptr<c10d::Reducer> reducer_;
};

}  // namespace mm::train

#include "distributed.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace mm::train {

namespace {

int ParseInt(const char* name, const char* value) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(value, &end, 10);
  if (errno != 0 || end == value || *end != '\0' || v < 0 || v > 1 << 30) {
    throw std::invalid_argument(std::string("environment variable ") + name + "='" + value +
                                "' is not a non-negative integer");
  }
  return static_cast<int>(v);
}

}  // namespace

DistEnv ReadDistEnv(const std::function<const char*(const char*)>& getenv_fn) {
  auto get = [&](const char* n) -> const char* {
    const char* v = getenv_fn ? getenv_fn(n) : std::getenv(n);
    return (v && *v) ? v : nullptr;
  };
  DistEnv env;
  auto take = [&](const char* rank, const char* size, const char* local, const char* source) {
    if (!get(rank) || !get(size)) return false;
    env.rank = ParseInt(rank, get(rank));
    env.world_size = ParseInt(size, get(size));
    env.local_rank = get(local) ? ParseInt(local, get(local)) : 0;
    env.source = source;
    return true;
  };
  if (!take("RANK", "WORLD_SIZE", "LOCAL_RANK", "torchrun") &&
      !take("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
            "openmpi") &&
      !take("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "slurm")) {
    return env;  // single process
  }
  if (env.world_size < 1 || env.rank >= env.world_size) {
    throw std::invalid_argument("rank " + std::to_string(env.rank) + " is outside world size " +
                                std::to_string(env.world_size) + " (from " + env.source + ")");
  }
  if (const char* a = get("MASTER_ADDR")) env.master_addr = a;
  if (const char* p = get("MASTER_PORT")) env.master_port = ParseInt("MASTER_PORT", p);
  if (env.master_port < 1 || env.master_port > 65535) {
    throw std::invalid_argument("MASTER_PORT " + std::to_string(env.master_port) +
                                " is not a TCP port");
  }
  if (const char* s = get("TORCHELASTIC_USE_AGENT_STORE")) {
    env.use_agent_store =
        std::string(s) == "True" || std::string(s) == "true" || std::string(s) == "1";
  }
  if (const char* r = get("TORCHELASTIC_RESTART_COUNT")) {
    env.restart_count = ParseInt("TORCHELASTIC_RESTART_COUNT", r);
  }
  return env;
}

struct Distributed::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  torch::Device device{torch::kCPU};  // where the group's collectives run (NCCL: the GPU)
};

Distributed::Distributed(const DistEnv& env, const torch::Device& device,
                         std::chrono::milliseconds timeout)
    : env_(env), impl_(std::make_unique<Impl>()) {
  if (env_.world_size <= 1) return;
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(env_.master_port);
  so.isServer = env_.rank == 0 && !env_.use_agent_store;
  so.numWorkers = env_.use_agent_store ? c10::nullopt : c10::optional<std::size_t>(env_.world_size);
  so.waitWorkers = !env_.use_agent_store;
  so.timeout = timeout;
  auto tcp = c10::make_intrusive<c10d::TCPStore>(env_.master_addr, so);
  // torchrun's agent store outlives a restart of the workers and still holds the keys of the
  // previous attempt's rendezvous: a prefix per attempt (torch uses "/worker/attempt_N").
  impl_->store = c10::make_intrusive<c10d::PrefixStore>(
      "mmtrain/attempt_" + std::to_string(env_.restart_count) + "/", tcp);

  c10::intrusive_ptr<c10d::ProcessGroup> group;
  if (device.is_cuda()) {
#ifdef USE_C10D_NCCL
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = timeout;
#if TORCH_VERSION_MAJOR >= 2
    auto backend =
        c10::make_intrusive<c10d::ProcessGroupNCCL>(impl_->store, env_.rank, env_.world_size, opts);
    group = c10::make_intrusive<c10d::ProcessGroup>(impl_->store, env_.rank, env_.world_size);
    group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL, backend);
    group->setDefaultBackend(c10d::ProcessGroup::BackendType::NCCL);
#else
    group =
        c10::make_intrusive<c10d::ProcessGroupNCCL>(impl_->store, env_.rank, env_.world_size, opts);
#endif
#else
    throw std::runtime_error(
        "this mmtrain was built without NCCL (configure with -DMM_TRAIN_NCCL=ON against a CUDA "
        "LibTorch)");
#endif
  } else {
    auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
    // GLOO_SOCKET_IFNAME (a comma-separated list of interfaces, as torch reads it) wins;
    // otherwise loopback for a local MASTER_ADDR, else the address this host's name resolves to.
    const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
    if (ifname && *ifname) {
      std::stringstream list(ifname);
      std::string iface;
      while (std::getline(list, iface, ',')) {
        if (!iface.empty()) {
          opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(iface));
        }
      }
    }
    if (opts->devices.empty()) {
      const bool loopback = env_.master_addr == "127.0.0.1" || env_.master_addr == "localhost";
      opts->devices.push_back(loopback
                                  ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                  : c10d::ProcessGroupGloo::createDefaultDevice());
    }
    opts->threads = 2;
#if TORCH_VERSION_MAJOR >= 2
    auto backend =
        c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, env_.rank, env_.world_size, opts);
    group = c10::make_intrusive<c10d::ProcessGroup>(impl_->store, env_.rank, env_.world_size);
    group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, backend);
    group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
#else
    group =
        c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, env_.rank, env_.world_size, opts);
#endif
  }
  impl_->group = group;
  impl_->device = device;
}

Distributed::~Distributed() = default;

c10::intrusive_ptr<c10d::ProcessGroup> Distributed::group() const { return impl_->group; }

void Distributed::AllReduceSum(torch::Tensor& t) {
  if (!enabled()) return;
  // NCCL reduces device tensors only: host figures (token counts, losses) make the trip.
  std::vector<torch::Tensor> v{t.device() == impl_->device ? t : t.to(impl_->device)};
  impl_->group->allreduce(v)->wait();
  if (!v[0].is_same(t)) t.copy_(v[0]);
}

std::vector<torch::Tensor> Distributed::AllGather(const torch::Tensor& t) {
  if (!enabled()) return {t};
  std::vector<torch::Tensor> in{t.to(impl_->device).contiguous()};  // NCCL: device tensors only
  std::vector<std::vector<torch::Tensor>> out(1);
  for (int r = 0; r < world_size(); ++r) out[0].push_back(torch::empty_like(in[0]));
  impl_->group->allgather(out, in)->wait();
  if (t.device() != impl_->device) {
    for (auto& o : out[0]) o = o.to(t.device());
  }
  return out[0];
}

void Distributed::Broadcast(const std::vector<torch::Tensor>& tensors) {
  if (!enabled() || tensors.empty()) return;
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> flat;
  for (const auto& t : tensors) flat.push_back(t.detach().reshape({-1}));
  std::vector<torch::Tensor> v{torch::cat(flat)};
  c10d::BroadcastOptions bo;
  bo.rootRank = 0;
  impl_->group->broadcast(v, bo)->wait();
  int64_t off = 0;
  for (const auto& t : tensors) {
    const int64_t n = t.numel();
    t.detach().copy_(v[0].slice(0, off, off + n).view_as(t));
    off += n;
  }
}

void Distributed::Barrier() {
  if (!enabled()) return;
  // Gloo's barrier ignores the timeout of its options in some versions: an all-reduce of
  // one element waits with the group's timeout.
  auto t = torch::zeros({1});
  AllReduceSum(t);
}

struct GradReducer::Counters {
  std::atomic<int64_t> buckets{0};
  std::atomic<int64_t> rounds{0};
};

namespace {

/// DDP's default reduction (mean over ranks: scale by 1/world while in the bucket, then sum),
/// as a communication hook so that it can count. With a hook registered the Reducer leaves the
/// division to the hook. Runs on the thread that runs backward; the counters are atomic.
class CountingAllReduceHook : public c10d::CommHookInterface {
 public:
  CountingAllReduceHook(c10::intrusive_ptr<c10d::ProcessGroup> group,
                        std::shared_ptr<GradReducer::Counters> counters)
      : group_(std::move(group)), counters_(std::move(counters)) {}

  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override {
    counters_->buckets.fetch_add(1);
    if (bucket.isLast()) counters_->rounds.fetch_add(1);
    std::vector<at::Tensor> tensors{bucket.getBufferRef()};
    tensors[0].mul_(1.0 / group_->getSize());  // as the Reducer's own 1/world scaling
    return group_->allreduce(tensors)->getFuture();
  }

  // The future holds the all-reduced tensor list (c10d::detail::parseCppCommHookResult does
  // the same, but libtorch does not export it).
  at::Tensor parseHookResult(const c10::IValue& result) override {
    if (result.isTensor()) return result.toTensor();
    return result.toTensorVector()[0];
  }

 private:
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  std::shared_ptr<GradReducer::Counters> counters_;
};

}  // namespace

GradReducer::GradReducer(std::vector<torch::Tensor> params, Distributed& dist, int64_t bucket_bytes,
                         int64_t first_bucket_bytes)
    : counters_(std::make_shared<Counters>()) {
  std::vector<bool> sparse(params.size(), false);
  auto assignment = c10d::compute_bucket_assignment_by_size(
      params, {static_cast<size_t>(first_bucket_bytes), static_cast<size_t>(bucket_bytes)}, sparse);
  auto buckets = std::get<0>(assignment);
  auto limits = std::get<1>(assignment);
  // As DistributedDataParallel does: gradients become ready roughly in reverse order of
  // registration, so the buckets are listed last-parameters-first.
  std::reverse(buckets.begin(), buckets.end());
  std::reverse(limits.begin(), limits.end());
  std::unordered_map<size_t, std::string> names;
  reducer_ = std::make_unique<c10d::Reducer>(
      std::move(params), std::move(buckets), std::move(limits), dist.group(), std::move(sparse),
      /*bucket_bytes_cap=*/bucket_bytes, /*find_unused_parameters=*/false,
      /*gradient_as_bucket_view=*/false, std::move(names),
      /*first_bucket_bytes_cap=*/first_bucket_bytes);
  reducer_->register_comm_hook(std::make_unique<CountingAllReduceHook>(dist.group(), counters_));
}

GradReducer::~GradReducer() = default;

void GradReducer::PrepareForBackward(const std::vector<torch::Tensor>& outputs) {
  // As DistributedDataParallel.forward does before every synchronised backward. Until it has
  // run once, every armed backward appends each parameter to the Reducer's rebuilt_params_ /
  // rebuilt_param_indices_ (should_rebuild_buckets() stays true), which then grow without
  // bound. The first call finds them empty and returns; the second rebuilds the buckets in
  // ready order, broadcasting rank 0's assignment (a collective: same point on every rank,
  // which holds here since every rank arms the same micro-step); later calls return at once.
  reducer_->rebuild_buckets();
  reducer_->prepare_for_backward(outputs);
}

int64_t GradReducer::allreduce_buckets() const { return counters_->buckets.load(); }

int64_t GradReducer::allreduce_rounds() const { return counters_->rounds.load(); }

}  // namespace mm::train

#include "distributed.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>
// Each backend only where this LibTorch's headers have it (trainer/CMakeLists.txt checks and
// defines torch's own macros): pip's wheels may lack gloo/, Debian's CPU build has no NCCL.
#ifdef USE_C10D_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <type_traits>

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

namespace {

// LibTorch 1.13: a backend is itself the ProcessGroup. 2.x: a ProcessGroup holds one backend
// per device type; its constructor lost the Options argument in later 2.x releases (the
// template picks whichever this LibTorch declares, checked at compile time).
#if TORCH_VERSION_MAJOR >= 2
template <typename Backend, typename PG = c10d::ProcessGroup>
c10::intrusive_ptr<PG> WrapBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   c10::intrusive_ptr<Backend> backend, c10::DeviceType device_type,
                                   typename PG::BackendType backend_type,
                                   std::chrono::milliseconds timeout) {
  c10::intrusive_ptr<PG> group;
  if constexpr (std::is_constructible_v<PG, const c10::intrusive_ptr<c10d::Store>&, int, int>) {
    group = c10::make_intrusive<PG>(store, rank, size);
    (void)timeout;
  } else {
    auto options = c10::make_intrusive<typename PG::Options>(backend->getBackendName(), timeout);
    group = c10::make_intrusive<PG>(store, rank, size, options);
  }
  group->setBackend(device_type, backend_type, backend);
  group->setDefaultBackend(backend_type);
  return group;
}
#endif

c10::intrusive_ptr<c10d::ProcessGroup> MakeNcclGroup(const c10::intrusive_ptr<c10d::Store>& store,
                                                     int rank, int size,
                                                     std::chrono::milliseconds timeout) {
#ifdef USE_C10D_NCCL
  auto opts = c10d::ProcessGroupNCCL::Options::create();
  opts->timeout = timeout;
  auto backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, opts);
#if TORCH_VERSION_MAJOR >= 2
  return WrapBackend(store, rank, size, backend, c10::DeviceType::CUDA,
                     c10d::ProcessGroup::BackendType::NCCL, timeout);
#else
  return backend;
#endif
#else
  (void)store, (void)rank, (void)size, (void)timeout;
  throw std::runtime_error(
      "this mmtrain was built without NCCL, so CUDA ranks cannot communicate (it needs a CUDA "
      "LibTorch and nccl.h at configure time: MM_TRAIN_NCCL, MM_NCCL_INCLUDE_DIR)");
#endif
}

c10::intrusive_ptr<c10d::ProcessGroup> MakeGlooGroup(const c10::intrusive_ptr<c10d::Store>& store,
                                                     const DistEnv& env,
                                                     std::chrono::milliseconds timeout) {
#ifdef USE_C10D_GLOO
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
    const bool loopback = env.master_addr == "127.0.0.1" || env.master_addr == "localhost";
    opts->devices.push_back(loopback ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                     : c10d::ProcessGroupGloo::createDefaultDevice());
  }
  opts->threads = 2;
  auto backend = c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank, env.world_size, opts);
#if TORCH_VERSION_MAJOR >= 2
  return WrapBackend(store, env.rank, env.world_size, backend, c10::DeviceType::CPU,
                     c10d::ProcessGroup::BackendType::GLOO, timeout);
#else
  return backend;
#endif
#else
  (void)store, (void)env, (void)timeout;
  throw std::runtime_error(
      "this mmtrain was built without Gloo (this LibTorch's headers have no gloo/), so CPU ranks "
      "cannot communicate: run one process, or CUDA ranks with NCCL, or rebuild with gloo's "
      "headers (MM_GLOO_INCLUDE_DIR)");
#endif
}

}  // namespace

Distributed::Distributed(const DistEnv& env, const torch::Device& device,
                         std::chrono::milliseconds timeout)
    : env_(env), impl_(std::make_unique<Impl>()) {
  if (env_.world_size <= 1) return;
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(env_.master_port);
  so.isServer = env_.rank == 0 && !env_.use_agent_store;
  // torchrun's agent store already knows its workers; our own server waits for all ranks.
  if (!env_.use_agent_store) so.numWorkers = static_cast<std::size_t>(env_.world_size);
  so.waitWorkers = !env_.use_agent_store;
  so.timeout = timeout;
  auto tcp = c10::make_intrusive<c10d::TCPStore>(env_.master_addr, so);
  // torchrun's agent store outlives a restart of the workers and still holds the keys of the
  // previous attempt's rendezvous: a prefix per attempt (torch uses "/worker/attempt_N").
  impl_->store = c10::make_intrusive<c10d::PrefixStore>(
      "mmtrain/attempt_" + std::to_string(env_.restart_count) + "/", tcp);
  impl_->group = device.is_cuda() ? MakeNcclGroup(impl_->store, env_.rank, env_.world_size, timeout)
                                  : MakeGlooGroup(impl_->store, env_, timeout);
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

namespace {

/// c10d::Reducer's constructor as this LibTorch declares it: 1.13 to 2.6 take per-bucket size
/// limits; later 2.x drop them and add skip_all_reduce_unused_params and use_python_reducer
/// (both false here: every parameter is used, the C++ Reducer is the one that runs), some also
/// a per-bucket cap list (empty: bucket_bytes_cap for every bucket). Chosen at compile time.
template <typename R = c10d::Reducer>
std::unique_ptr<R> MakeReducer(std::vector<torch::Tensor> params,
                               std::vector<std::vector<size_t>> buckets, std::vector<size_t> limits,
                               c10::intrusive_ptr<c10d::ProcessGroup> group,
                               std::vector<bool> sparse, int64_t bucket_bytes,
                               int64_t first_bucket_bytes) {
  using Params = std::vector<torch::Tensor>;
  using Buckets = std::vector<std::vector<size_t>>;
  using Group = c10::intrusive_ptr<c10d::ProcessGroup>;
  using Names = std::unordered_map<size_t, std::string>;
  Names names;
  const bool find_unused = false, as_view = false, skip_unused = false, python_reducer = false;
  if constexpr (std::is_constructible_v<R, Params, Buckets, std::vector<size_t>, Group,
                                        std::vector<bool>, int64_t, bool, bool, Names, int64_t>) {
    return std::make_unique<R>(std::move(params), std::move(buckets), std::move(limits),
                               std::move(group), std::move(sparse), bucket_bytes, find_unused,
                               as_view, std::move(names), first_bucket_bytes);
  } else if constexpr (std::is_constructible_v<R, Params, Buckets, Group, std::vector<bool>,
                                               int64_t, bool, bool, Names, int64_t, bool, bool>) {
    (void)limits;
    return std::make_unique<R>(std::move(params), std::move(buckets), std::move(group),
                               std::move(sparse), bucket_bytes, find_unused, as_view,
                               std::move(names), first_bucket_bytes, skip_unused, python_reducer);
  } else {
    (void)limits;
    return std::make_unique<R>(std::move(params), std::move(buckets), std::move(group),
                               std::move(sparse), bucket_bytes, find_unused, as_view,
                               std::move(names), first_bucket_bytes, skip_unused, python_reducer,
                               std::vector<int64_t>{});
  }
}

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
  reducer_ = MakeReducer(std::move(params), std::move(buckets), std::move(limits), dist.group(),
                         std::move(sparse), bucket_bytes, first_bucket_bytes);
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

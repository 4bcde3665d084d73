// DefaultLoaderThreads: the decode threads a Loader starts when LoaderOptions::num_threads is 0.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "mm/reader.h"

namespace mm::reader {
namespace {

// CPUs online, at least 1.
int OnlineCpus() {
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? static_cast<int>(online) : 1;
}

// CPUs in this process's affinity mask (what taskset, cgroup cpusets and Slurm's binding
// leave it), at least 1; the online count when the mask cannot be read.
int AffinityCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return OnlineCpus();
}

// A positive integer environment variable, else 0 (absent, empty or not a number).
int EnvCount(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return 0;
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(v, &end, 10);
  if (errno != 0 || *end != '\0' || n < 1 || n > 1 << 20) return 0;
  return static_cast<int>(n);
}

}  // namespace

int DefaultLoaderThreads() {
  const int cpus = AffinityCpus();
  int ranks = 1;
  if (cpus >= OnlineCpus()) {  // not bound to a share of the machine: share it among the ranks
    ranks = EnvCount("LOCAL_WORLD_SIZE");                            // torchrun
    if (ranks == 0) ranks = EnvCount("OMPI_COMM_WORLD_LOCAL_SIZE");  // Open MPI's mpirun
  }
  return std::clamp(cpus / std::max(1, ranks), 1, kMaxLoaderThreads);
}

}  // namespace mm::reader

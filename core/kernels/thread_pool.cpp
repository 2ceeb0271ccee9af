#include "core/kernels/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace ember {
namespace {

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// How long a thread polls before it blocks: long enough to bridge the gap between two matmuls of
// one forward pass, short enough that idle threads between tokens stop burning a core.
constexpr auto kSpinTime = std::chrono::microseconds(100);

// Polls pred() for up to kSpinTime; true when it became true.
template <class Pred>
bool spin_until(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (pred()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() > deadline) return false;
  }
}

}  // namespace

struct ThreadPool::State {
  // The job, written by the caller before it bumps `generation` (release) and read by workers
  // after they see the new generation (acquire).
  ChunkFn fn = nullptr;
  void* ctx = nullptr;
  int64_t n_chunks = 0;

  alignas(64) std::atomic<uint32_t> generation{0};  // 32 bits: atomic wait is a plain futex
  alignas(64) std::atomic<int64_t> next_chunk{0};
  alignas(64) std::atomic<int> busy_workers{0};
  std::atomic<bool> stopping{false};
  // The job's first exception. `failed` elects the one thread that writes `error`; the caller reads
  // it after every worker has signalled (busy_workers, release/acquire), then clears both.
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::vector<std::thread> workers;

  void work(int thread_index) {
    for (int64_t chunk = next_chunk.fetch_add(1, std::memory_order_relaxed); chunk < n_chunks;
         chunk = next_chunk.fetch_add(1, std::memory_order_relaxed)) {
      // No cost on the normal path (zero-cost exceptions); fn is an indirect call anyway.
      try {
        fn(ctx, chunk, thread_index);
      } catch (...) {
        record_failure();
      }
    }
  }

  void record_failure() {
    if (!failed.exchange(true, std::memory_order_acq_rel)) error = std::current_exception();
    // Hand out no more chunks: the job has failed, finishing it is wasted work (and may fail again).
    next_chunk.store(n_chunks, std::memory_order_relaxed);
  }

  // Caller, after the job: the first exception, if any, rethrown (and the pool reset for the next).
  void rethrow_failure() {
    if (!failed.load(std::memory_order_acquire)) return;
    std::exception_ptr e = std::exchange(error, nullptr);
    failed.store(false, std::memory_order_relaxed);
    std::rethrow_exception(e);
  }

  void worker_loop(int thread_index) {
    uint32_t seen = 0;
    for (;;) {
      if (!spin_until([&] { return generation.load(std::memory_order_acquire) != seen; })) {
        generation.wait(seen, std::memory_order_acquire);
      }
      seen = generation.load(std::memory_order_acquire);
      if (stopping.load(std::memory_order_acquire)) return;
      work(thread_index);
      busy_workers.fetch_sub(1, std::memory_order_release);
    }
  }
};

ThreadPool::ThreadPool(int n_threads) : state_(new State) {
  if (n_threads <= 0) n_threads = physical_core_count();
  try {
    state_->workers.reserve(static_cast<size_t>(n_threads - 1));
    for (int i = 1; i < n_threads; ++i) {
      state_->workers.emplace_back([s = state_, i] { s->worker_loop(i); });
    }
  } catch (...) {
    // A thread could not be started (std::system_error): the destructor will not run, so stop and
    // join the ones already running here (a joinable std::thread destroyed would std::terminate).
    shut_down();
    throw;
  }
}

ThreadPool::~ThreadPool() { shut_down(); }

void ThreadPool::shut_down() noexcept {
  state_->stopping.store(true, std::memory_order_release);
  state_->generation.fetch_add(1, std::memory_order_release);
  state_->generation.notify_all();
  for (std::thread& t : state_->workers) t.join();
  delete state_;
  state_ = nullptr;
}

int ThreadPool::size() const { return static_cast<int>(state_->workers.size()) + 1; }

void ThreadPool::run(int64_t n_chunks, ChunkFn fn, void* ctx) {
  if (n_chunks <= 0) return;
  State& s = *state_;
  if (s.workers.empty() || n_chunks == 1) {
    // Only the caller's thread: an exception simply propagates, skipping the remaining chunks.
    for (int64_t chunk = 0; chunk < n_chunks; ++chunk) fn(ctx, chunk, 0);
    return;
  }
  s.fn = fn;
  s.ctx = ctx;
  s.n_chunks = n_chunks;
  s.next_chunk.store(0, std::memory_order_relaxed);
  s.busy_workers.store(static_cast<int>(s.workers.size()), std::memory_order_relaxed);
  s.generation.fetch_add(1, std::memory_order_release);
  s.generation.notify_all();
  s.work(0);
  // Workers may still be finishing their last chunk; they never touch the job after signalling.
  if (!spin_until([&] { return s.busy_workers.load(std::memory_order_acquire) == 0; })) {
    while (s.busy_workers.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  }
  s.rethrow_failure();  // every worker is out of the job: unwinding the caller's frame is safe now
}

int ThreadPool::physical_core_count() {
  // One core per distinct sibling list among the CPUs this process may run on (a container or
  // taskset can allow fewer than the machine has).
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  const bool have_mask = sched_getaffinity(0, sizeof allowed, &allowed) == 0;
  std::set<std::string> cores;
  const std::filesystem::path cpus = "/sys/devices/system/cpu";
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (have_mask && !CPU_ISSET(cpu, &allowed)) continue;
    std::ifstream siblings(cpus / ("cpu" + std::to_string(cpu)) / "topology" / "thread_siblings_list");
    std::string line;
    if (!siblings || !std::getline(siblings, line)) continue;
    cores.insert(line);
  }
  if (!cores.empty()) return static_cast<int>(cores.size());
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

}  // namespace ember

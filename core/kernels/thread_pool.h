#pragma once
// A persistent pool of worker threads for the kernels: created once per engine, reused for every
// matmul of every token. Work is handed out in chunks from an atomic counter so uneven chunks
// balance themselves; the calling thread works too. No allocation per parallel_for (an exception
// in a task may allocate its exception_ptr: the error path only).
#include <cstdint>
#include <type_traits>

namespace ember {

class ThreadPool {
 public:
  // n_threads <= 0 means one thread per physical core.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const;  // threads taking part, including the caller

  // Calls fn(chunk, thread_index) for every chunk in [0, n_chunks), spread over the threads;
  // returns when all are done. Not reentrant.
  // When fn throws (e.g. a storage read failing inside a task), the first exception is kept, no
  // further chunks are started (chunks already running finish; which chunks ran is unspecified),
  // and it is rethrown here on the caller's thread once every thread has left the job: no task
  // ever runs against the caller's frame after it unwound, no exception escapes a worker thread
  // (std::terminate), and the pool stays usable for the next call.
  template <class Fn>
  void parallel_for(int64_t n_chunks, Fn&& fn) {
    using Callable = std::remove_reference_t<Fn>;
    run(n_chunks, [](void* ctx, int64_t chunk, int thread) { (*static_cast<Callable*>(ctx))(chunk, thread); },
        const_cast<void*>(static_cast<const void*>(&fn)));
  }

  static int physical_core_count();

 private:
  using ChunkFn = void (*)(void* ctx, int64_t chunk, int thread);
  void run(int64_t n_chunks, ChunkFn fn, void* ctx);
  void shut_down() noexcept;  // stops and joins the workers, frees the state
  struct State;
  State* state_;
};

}  // namespace ember

#pragma once
// The engine thread: the one place that runs the model. It owns the Model, a ThreadPool and one
// InferenceContext and works through a bounded queue of jobs. It never touches sockets: results
// reach the HTTP side only through the job's callbacks, which post them to the connection.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "core/kernels/thread_pool.h"
#include "core/model/generator.h"
#include "core/model/inference_context.h"
#include "core/model/model.h"
#include "core/sampling/sampler.h"

namespace ember::server {

struct GenerationJob {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  int64_t max_tokens = 16;
  // Set by the connection when its client went away; the generation then stops at the next token.
  std::shared_ptr<std::atomic<bool>> cancelled = std::make_shared<std::atomic<bool>>(false);
  // Both run on the engine thread and must only hand their data over (e.g. post to an executor).
  std::function<void(std::string_view text)> on_text;
  // Always called exactly once per accepted job; `error` is null on success. A job cancelled
  // before it started reports FinishReason::Cancelled with zero tokens.
  std::function<void(const GenerationStats& stats, std::exception_ptr error)> on_done;
};

struct EngineOptions {
  int threads = 0;                // ThreadPool size; 0: one per physical core
  ContextOptions context;
  size_t max_queued_jobs = 16;    // jobs waiting (not counting the running one)
};

class EngineWorker {
 public:
  EngineWorker(std::unique_ptr<Model> model, const EngineOptions& options);
  ~EngineWorker();  // stop() and join
  EngineWorker(const EngineWorker&) = delete;
  EngineWorker& operator=(const EngineWorker&) = delete;

  // Queues the job; false when the queue is full or the worker is stopping (the job is dropped
  // and its callbacks are never called).
  bool try_submit(GenerationJob job);
  // Cancels the running job, fails the queued ones with an error and joins the thread.
  void stop();

  const Model& model() const { return *model_; }
  int64_t n_ctx() const { return n_ctx_; }
  int threads() const { return pool_.size(); }
  // Jobs queued or running.
  size_t pending() const;

 private:
  void loop();
  void run_job(GenerationJob& job);

  std::unique_ptr<Model> model_;
  ThreadPool pool_;
  InferenceContext ctx_;
  int64_t n_ctx_;
  size_t max_queued_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<GenerationJob> queue_;
  bool stopping_ = false;
  bool running_job_ = false;
  std::shared_ptr<std::atomic<bool>> current_cancel_;
  std::thread thread_;
};

}  // namespace ember::server

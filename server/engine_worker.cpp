#include "server/engine_worker.h"

#include <stdexcept>

namespace ember::server {

EngineWorker::EngineWorker(std::unique_ptr<Model> model, const EngineOptions& options)
    : model_(std::move(model)),
      pool_(options.threads),
      ctx_(*model_, pool_, options.context),
      n_ctx_(ctx_.n_ctx()),
      max_queued_(options.max_queued_jobs) {
  thread_ = std::thread([this] { loop(); });
}

EngineWorker::~EngineWorker() { stop(); }

bool EngineWorker::try_submit(GenerationJob job) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || queue_.size() >= max_queued_) return false;
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
  return true;
}

size_t EngineWorker::pending() const {
  std::lock_guard lock(mu_);
  return queue_.size() + (running_job_ ? 1 : 0);
}

void EngineWorker::stop() {
  std::deque<GenerationJob> dropped;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    if (current_cancel_) current_cancel_->store(true);
    dropped.swap(queue_);
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (auto& job : dropped) {
    if (job.on_done) {
      GenerationStats stats;
      stats.finish = FinishReason::Cancelled;
      job.on_done(stats, std::make_exception_ptr(std::runtime_error("the server is shutting down")));
    }
  }
}

void EngineWorker::loop() {
  for (;;) {
    GenerationJob job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      running_job_ = true;
      current_cancel_ = job.cancelled;
    }
    run_job(job);
    std::lock_guard lock(mu_);
    running_job_ = false;
    current_cancel_.reset();
  }
}

void EngineWorker::run_job(GenerationJob& job) {
  GenerationStats stats;
  std::exception_ptr error;
  if (job.cancelled->load()) {
    stats.finish = FinishReason::Cancelled;
  } else {
    try {
      // Every request starts from an empty context (prefix reuse is a later optimisation).
      ctx_.reset();
      Sampler sampler(job.sampling, static_cast<int32_t>(model_->config().n_vocab));
      GenerationLimits limits;
      limits.max_tokens = job.max_tokens;
      stats = generate(ctx_, sampler, job.prompt, limits, [&](int32_t, std::string_view text) {
        if (!text.empty() && job.on_text) job.on_text(text);
        return !job.cancelled->load();
      });
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (job.on_done) {
    try {
      job.on_done(stats, error);
    } catch (...) {
      // A callback that throws must not take the engine thread down; the connection times out.
    }
  }
}

}  // namespace ember::server

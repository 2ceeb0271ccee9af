#include "io/uring_reader.h"

#include <liburing.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "io/direct_file.h"
#include "io/file.h"

namespace ember::io {
namespace {

// What an io_uring setup errno means on the systems Ember runs on.
std::string setup_error(const char* what, int err) {
  std::string msg = what;
  msg += ": ";
  msg += std::strerror(err);
  if (err == ENOSYS) msg += " (ENOSYS: the kernel has no io_uring)";
  if (err == EPERM) msg += " (EPERM: blocked by a seccomp policy or the kernel.io_uring_disabled sysctl)";
  if (err == ENOMEM) msg += " (ENOMEM: locked-memory limit, see ulimit -l)";
  return msg;
}

uint32_t round_up_pow2(uint32_t v) {
  uint32_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

// Some seccomp policies do not make a refused call fail but kill the caller with SIGSYS
// (SECCOMP_RET_TRAP or _KILL; Android's app policy traps, and whether io_uring is on its list varies
// by release). So io_uring_setup is first tried in a forked child: if that child dies of a signal,
// io_uring is off limits and this process never makes the call. The child makes raw system calls
// only and leaves with _exit, which is safe after fork in a threaded process; the fork copies page
// tables, not memory, and happens once per probe. Empty when the child survived (whatever its
// call returned: the in-process probe below then says why it failed, if it did).
std::string setup_kills_the_caller() {
  const pid_t pid = fork();
  if (pid < 0) return "";  // cannot tell: let the in-process probe decide
  if (pid == 0) {
    const rlimit no_core{0, 0};  // a trapped call must not leave a core file behind
    setrlimit(RLIMIT_CORE, &no_core);
    io_uring_params params{};
    const long fd = syscall(__NR_io_uring_setup, 1, &params);
    if (fd >= 0) close(static_cast<int>(fd));
    _exit(0);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return "";
  }
  if (!WIFSIGNALED(status)) return "";
  const int sig = WTERMSIG(status);
  return std::string("io_uring_setup killed a probe process with signal ") + std::to_string(sig) +
         (sig == SIGSYS ? " (SIGSYS: refused by a seccomp policy that traps, e.g. Android's for apps)" : "");
}

}  // namespace

std::string UringReader::unavailable_reason() {
  if (std::string killed = setup_kills_the_caller(); !killed.empty()) return killed;
  io_uring ring{};
  int rc = io_uring_queue_init(4, &ring, 0);
  if (rc < 0) return setup_error("io_uring_queue_init", -rc);

  std::string reason;
  if (io_uring_probe* probe = io_uring_get_probe_ring(&ring)) {
    if (!io_uring_opcode_supported(probe, IORING_OP_READ) || !io_uring_opcode_supported(probe, IORING_OP_READ_FIXED)) {
      reason = "io_uring lacks IORING_OP_READ or IORING_OP_READ_FIXED (kernel older than 5.6)";
    }
    io_uring_free_probe(probe);
  } else {
    reason = "io_uring_register_probe failed (kernel older than 5.6)";
  }
  // A policy may allow ring setup yet block io_uring_enter: make one round trip.
  if (reason.empty()) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    io_uring_prep_nop(sqe);
    rc = io_uring_submit(&ring);
    if (rc < 0) {
      reason = setup_error("io_uring_submit of a NOP", -rc);
    } else {
      io_uring_cqe* cqe = nullptr;
      rc = io_uring_wait_cqe(&ring, &cqe);
      if (rc < 0) reason = setup_error("io_uring_wait_cqe of a NOP", -rc);
      else if (cqe->res < 0) reason = setup_error("io_uring NOP", -cqe->res);
      if (rc == 0) io_uring_cqe_seen(&ring, cqe);
    }
  }
  io_uring_queue_exit(&ring);
  return reason;
}

UringReader::UringReader(const DirectFile& file, const UringOptions& options)
    : ring_(std::make_unique<io_uring>()),
      fd_(file.fd()),
      file_size_(file.size()),
      alignment_(file.alignment()),
      chunk_(options.fixed_buffer_chunk) {
  // The kernel's limits (IORING_MAX_ENTRIES, IORING_MAX_CQ_ENTRIES), checked here for a clear message.
  if (options.queue_depth == 0 || options.capacity == 0 || options.queue_depth > 32768 || options.capacity > 65536) {
    throw std::invalid_argument("UringReader: queue depth " + std::to_string(options.queue_depth) + " and capacity " +
                                std::to_string(options.capacity) + " must be in [1, 32768] and [1, 65536]");
  }
  if (chunk_ == 0 || chunk_ % kDirectAlignment != 0 || chunk_ > (1ull << 30)) {
    throw std::invalid_argument("UringReader: fixed_buffer_chunk must be a multiple of 4096 of at most 1 GiB");
  }
  slots_.resize(options.capacity);  // before the ring exists: a failed allocation leaks nothing
  free_.reserve(options.capacity);
  for (uint32_t i = options.capacity; i-- > 0;) free_.push_back(i);

  // The completion queue holds every read in flight, so completions are never dropped or pushed
  // to the kernel's overflow list however far the caller falls behind.
  // Cooperative task running (Linux 5.19+): a completion does not interrupt the thread that
  // submitted (an IPI and a trip through the kernel per completion, taken from the compute the
  // reads overlap); its CQE is posted the next time that thread enters the kernel, which
  // io_uring_peek_cqe does when the TASKRUN flag says work is waiting. Older kernels refuse the
  // flags: the plain ring then.
  io_uring_params params{};
  params.flags = IORING_SETUP_CQSIZE | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
  params.cq_entries = round_up_pow2(std::max(options.capacity, 2 * options.queue_depth));
  int rc = io_uring_queue_init_params(options.queue_depth, ring_.get(), &params);
  if (rc == -EINVAL) {
    params = io_uring_params{};
    params.flags = IORING_SETUP_CQSIZE;
    params.cq_entries = round_up_pow2(std::max(options.capacity, 2 * options.queue_depth));
    rc = io_uring_queue_init_params(options.queue_depth, ring_.get(), &params);
  }
  if (rc < 0) throw IoError(file.path() + ": " + setup_error("io_uring_queue_init", -rc));
  queue_depth_ = ring_->sq.ring_entries;

  // A registered file saves a file-table lookup and reference per read. Optional: without it reads
  // use the plain descriptor.
  if (io_uring_register_files(ring_.get(), &fd_, 1) == 0) file_index_ = 0;
}

UringReader::~UringReader() {
  // The kernel may still write into the caller's buffers: wait for every read before the ring goes.
  while (in_flight_ > 0) {
    if (queued_ > 0) io_uring_submit(ring_.get());
    queued_ = 0;
    io_uring_cqe* cqe = nullptr;
    const int rc = io_uring_wait_cqe(ring_.get(), &cqe);
    if (rc == -EINTR) continue;
    if (rc < 0) break;  // nothing sensible left to do in a destructor
    io_uring_cqe_seen(ring_.get(), cqe);
    // Retries are not re-queued here: the caller no longer wants the data.
    --in_flight_;
  }
  io_uring_queue_exit(ring_.get());
}

void UringReader::register_arena(void* base, size_t bytes) {
  if (in_flight_ > 0) throw std::logic_error("UringReader::register_arena with reads in flight");
  if (arena_ != nullptr) {
    io_uring_unregister_buffers(ring_.get());
    arena_ = nullptr;
    arena_bytes_ = 0;
    arena_chunks_.clear();
  }
  if (base == nullptr || bytes == 0) return;  // no arena: every read is an ordinary read
  auto* p = static_cast<uint8_t*>(base);
  for (size_t at = 0; at < bytes; at += chunk_) {
    arena_chunks_.push_back(iovec{p + at, static_cast<size_t>(std::min<uint64_t>(chunk_, bytes - at))});
  }
  const int rc = io_uring_register_buffers(ring_.get(), arena_chunks_.data(), static_cast<unsigned>(arena_chunks_.size()));
  if (rc < 0) {
    arena_chunks_.clear();
    throw IoError("io_uring_register_buffers of " + std::to_string(bytes) + " bytes: " +
                  std::strerror(-rc) +
                  (rc == -ENOMEM ? " (the locked-memory limit, ulimit -l, is below the arena size)" : ""));
  }
  arena_ = p;
  arena_bytes_ = bytes;
}

void UringReader::submit_queued() {
  // EINTR/EAGAIN/EBUSY are transient (a signal, the kernel short of memory or completion room);
  // a bounded number of retries keeps a wedged ring from spinning us forever.
  int transient = 0;
  while (queued_ > 0) {
    const int rc = io_uring_submit(ring_.get());
    if ((rc == -EINTR || rc == -EAGAIN || rc == -EBUSY) && ++transient < 1000) {
      sched_yield();
      continue;
    }
    if (rc <= 0) {
      throw IoError(std::string("io_uring_submit: ") + (rc < 0 ? std::strerror(-rc) : "no request accepted"));
    }
    queued_ -= std::min<size_t>(queued_, static_cast<size_t>(rc));
  }
}

void UringReader::queue_read(uint32_t index) {
  Slot& slot = slots_[index];
  const uint32_t done = slot.progress.done;
  uint8_t* dst = static_cast<uint8_t*>(slot.request.dst) + done;
  const uint32_t len = slot.request.length - done;
  const uint64_t off = slot.request.offset + done;

  io_uring_sqe* sqe = io_uring_get_sqe(ring_.get());
  if (sqe == nullptr) {  // the submission queue is full: this is where a big batch goes in rounds
    submit_queued();
    sqe = io_uring_get_sqe(ring_.get());
  }
  const int fd = file_index_ >= 0 ? file_index_ : fd_;
  // A fixed-buffer read must lie inside one registered chunk.
  int buf_index = -1;
  if (arena_ != nullptr && dst >= arena_ && static_cast<size_t>(dst - arena_) + len <= arena_bytes_) {
    const size_t at = static_cast<size_t>(dst - arena_);
    if (at / chunk_ == (at + len - 1) / chunk_) buf_index = static_cast<int>(at / chunk_);
  }
  if (buf_index >= 0) {
    io_uring_prep_read_fixed(sqe, fd, dst, len, off, buf_index);
    ++fixed_reads_;
  } else {
    io_uring_prep_read(sqe, fd, dst, len, off);
  }
  if (file_index_ >= 0) sqe->flags |= IOSQE_FIXED_FILE;
  io_uring_sqe_set_data64(sqe, index);
  ++queued_;
}

void UringReader::submit(std::span<const ReadRequest> batch) {
  validate_batch(batch, free_slots(), alignment_);
  for (const ReadRequest& r : batch) {
    const uint32_t index = free_.back();
    free_.pop_back();
    slots_[index] = Slot{r, ReadProgress{}};
    ++in_flight_;
    queue_read(index);
  }
  submit_queued();
}

size_t UringReader::harvest(std::span<ReadCompletion> out, size_t min_complete) {
  const size_t need = std::min({min_complete, in_flight_, out.size()});
  size_t n = 0;
  for (;;) {
    io_uring_cqe* cqe = nullptr;
    while (n < out.size() && io_uring_peek_cqe(ring_.get(), &cqe) == 0 && cqe != nullptr) {
      const auto index = static_cast<uint32_t>(io_uring_cqe_get_data64(cqe));
      const int64_t got = cqe->res;
      io_uring_cqe_seen(ring_.get(), cqe);
      Slot& slot = slots_[index];
      int64_t result = 0;
      if (advance_read(slot.request, slot.progress, got, file_size_, &result) == ReadStep::Retry) {
        queue_read(index);  // the rest of a short read; still in flight
        continue;
      }
      out[n++] = ReadCompletion{slot.request.tag, result, slot.request.offset, slot.request.length};
      free_.push_back(index);
      --in_flight_;
    }
    submit_queued();  // retries
    if (n >= need) return n;
    const int rc = io_uring_wait_cqe(ring_.get(), &cqe);
    // Completions already written to `out` are delivered first: throwing now would lose them (their
    // slots are free again and the caller would wait for them forever).
    if (rc < 0 && rc != -EINTR && n > 0) return n;
    if (rc < 0 && rc != -EINTR) throw IoError(std::string("io_uring_wait_cqe: ") + std::strerror(-rc));
  }
}

}  // namespace ember::io

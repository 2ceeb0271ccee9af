// The io_uring fallback on a system whose seccomp policy refuses io_uring_setup, as Android's app
// policy does: a forked child installs a real seccomp filter that makes io_uring_setup fail with
// EPERM or ENOSYS, or trap (SIGSYS, which kills a process without a handler), then asks
// make_batch_reader for `auto` and `uring`. The child reports over a
// pipe; the parent checks. This exercises the real probe (UringReader::unavailable_reason) rather
// than the replaceable ReaderOptions::uring_probe of io_backend_test.cpp.
#include <doctest/doctest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <string>

#include "io/direct_file.h"
#include "io/file.h"
#include "io/io_backend.h"
#include "tests/io/io_test_files.h"

using namespace ember::io;
using ember::io_test::TestFile;

namespace {

#if defined(__x86_64__)
constexpr unsigned kAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr unsigned kAuditArch = AUDIT_ARCH_AARCH64;
#endif

// Installs the filter in the calling process: io_uring_setup gets `action` (SECCOMP_RET_ERRNO | err,
// or SECCOMP_RET_TRAP), all else is allowed. Returns 0, or the errno of the prctl that failed
// (qemu-user refuses PR_SET_SECCOMP with EINVAL).
int refuse_io_uring_setup(unsigned action) {
#if defined(__x86_64__) || defined(__aarch64__)
  sock_filter filter[] = {
      // A syscall of another ABI (e.g. x32 or a compat task): leave it alone.
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, action),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
  // Without no_new_privs an unprivileged process may not install a filter.
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) return errno;
  return 0;
#else
  return ENOSYS;
#endif
}

struct ChildReport {
  bool seccomp_ok = false;
  std::string text;  // "auto=<backend>|<fallback reason>|uring=<error or backend>"
};

// Runs the probe in a child under the filter. fork() in a test binary: the child uses only the io
// library and leaves with _exit, so no doctest state is touched twice.
ChildReport probe_under_filter(const DirectFile& file, unsigned action) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    std::string out;
    if (const int rc = refuse_io_uring_setup(action); rc != 0) {
      out = "noseccomp:" + std::to_string(rc);
    } else {
      ReaderChoice choice = make_batch_reader(IoBackend::Auto, file, {.capacity = 8, .pread_threads = 2});
      out = "auto=" + choice.reader->backend_name() + "|" + choice.fallback_reason + "|uring=";
      try {
        out += make_batch_reader(IoBackend::Uring, file).reader->backend_name();
      } catch (const IoError& e) {
        out += e.what();
      }
    }
    const ssize_t n = write(fds[1], out.data(), out.size());
    _exit(n == static_cast<ssize_t>(out.size()) ? 0 : 1);
  }
  close(fds[1]);
  ChildReport report;
  char buf[1024];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) report.text.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  report.seccomp_ok = report.text.rfind("noseccomp:", 0) != 0;
  return report;
}

}  // namespace

TEST_CASE("io_uring refused by seccomp (EPERM, ENOSYS, SIGSYS): auto falls back to the pread pool and says why") {
  TestFile tmp(ember::io_test::disk_dir(), ember::io_test::random_bytes(8192, 3));
  const DirectFile file = DirectFile::open(tmp.path());
  struct Case {
    unsigned action;
    const char* tag;      // for messages
    const char* reason;   // what the fallback reason must contain
  };
  const Case cases[] = {
      {SECCOMP_RET_ERRNO | EPERM, "EPERM", "io_uring_queue_init: Operation not permitted (EPERM:"},
      {SECCOMP_RET_ERRNO | ENOSYS, "ENOSYS", "io_uring_queue_init: Function not implemented (ENOSYS:"},
      {SECCOMP_RET_TRAP, "TRAP", "io_uring_setup killed a probe process with signal 31 (SIGSYS:"},
  };
  for (const Case& c : cases) {
    const char* tag = c.tag;
    CAPTURE(tag);
    const ChildReport r = probe_under_filter(file, c.action);
    std::printf("uring_seccomp (%s): %s\n", tag, r.text.c_str());
    if (!r.seccomp_ok) {
      // qemu-user refuses PR_SET_SECCOMP (it would filter the emulator's own calls); there the
      // emulated kernel has no io_uring at all, and io_backend_test's real probe shows the fallback.
      std::printf("SKIPPED: seccomp filters unavailable here (%s)\n", r.text.c_str());
      return;
    }
    CHECK(r.text.rfind(std::string("auto=pread|io_uring is unavailable (") + c.reason, 0) == 0);
    CHECK(r.text.find("reading with a pool of 2 pread threads|") != std::string::npos);
    CHECK(r.text.find("|uring=--io-backend uring: io_uring is unavailable here") != std::string::npos);
  }
}

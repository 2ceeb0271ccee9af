// run_measured: runs one command and prints what the kernel knows about it afterwards as one JSON
// line: exit status, wall and CPU time, peak RSS, page faults, bytes read from storage
// (/proc/PID/io read_bytes), CPU steal and iowait over the run, and, with --cgroup, the memory
// cgroup's high-water mark and limit hits. Used by bench/memcap_bench.sh.
//
//   run_measured [-o FILE] [--cgroup DIR] [--timeout SECONDS] -- COMMAND [ARGS...]
//
// The command keeps its stdin, stdout and stderr; the JSON line goes to FILE (default stderr).
// --timeout kills the command (SIGKILL) after that many seconds and says so ("timed_out").
// With --cgroup DIR the child writes its own pid to DIR/cgroup.procs before exec, so the command
// and everything it starts are charged to that cgroup (cgroup v1 memory controller: anonymous
// memory and the page cache it reads).
//
// Why a program and not /usr/bin/time: /proc/PID/io disappears when the process is reaped, and a
// shell cannot read it in between. waitid(WEXITED | WNOWAIT) waits for the exit but leaves the
// zombie in place, whose /proc/PID/io still holds the whole thread group's counters (threads that
// exited earlier, io_uring workers included, were folded into it); wait4 then reaps it and gives
// ru_maxrss. Exit status of run_measured: the command's (128 + signal when killed), 125 when it
// could not be started or measured.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { EXIT_SETUP = 125 };

// The running child, for the SIGALRM handler of --timeout.
static volatile pid_t g_child = 0;
static volatile sig_atomic_t g_timed_out = 0;

static void on_alarm(int sig) {
    (void) sig;
    if (g_child > 0) {
        g_timed_out = 1;
        kill(g_child, SIGKILL);
    }
}

struct cpu_ticks {
    bool ok;
    unsigned long long total, steal, iowait;
};

struct io_counters {
    bool ok;
    unsigned long long rchar, wchar, read_bytes, write_bytes, cancelled_write_bytes;
};

static void usage(void) {
    fprintf(stderr, "usage: run_measured [-o FILE] [--cgroup DIR] [--timeout SECONDS] -- COMMAND [ARGS...]\n");
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

// The aggregate "cpu" line of /proc/stat: user nice system idle iowait irq softirq steal (guest
// time is already inside user and nice, so it is not added again).
static struct cpu_ticks read_cpu_ticks(void) {
    struct cpu_ticks t = {0};
    FILE * f = fopen("/proc/stat", "r");
    if (f == NULL) {
        return t;
    }
    unsigned long long v[8] = {0};
    if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
               &v[6], &v[7]) == 8) {
        t.ok = true;
        for (int i = 0; i < 8; ++i) {
            t.total += v[i];
        }
        t.iowait = v[4];
        t.steal = v[7];
    }
    fclose(f);
    return t;
}

static struct io_counters read_proc_io(pid_t pid) {
    struct io_counters c = {0};
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/io", (int) pid);
    FILE * f = fopen(path, "r");
    if (f == NULL) {
        return c;
    }
    char key[64];
    unsigned long long value;
    int seen = 0;
    while (fscanf(f, "%63[^:]: %llu\n", key, &value) == 2) {
        if (strcmp(key, "rchar") == 0) { c.rchar = value; ++seen; }
        else if (strcmp(key, "wchar") == 0) { c.wchar = value; ++seen; }
        else if (strcmp(key, "read_bytes") == 0) { c.read_bytes = value; ++seen; }
        else if (strcmp(key, "write_bytes") == 0) { c.write_bytes = value; ++seen; }
        else if (strcmp(key, "cancelled_write_bytes") == 0) { c.cancelled_write_bytes = value; ++seen; }
    }
    fclose(f);
    c.ok = seen == 5;
    return c;
}

// DIR/NAME opened for reading, or NULL (missing, unreadable, or a path too long).
static FILE * open_cgroup_file(const char * dir, const char * name) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int) sizeof path) {
        return NULL;
    }
    return fopen(path, "r");
}

// One number from a cgroup file ("memory.failcnt"), or -1 when it is missing or unreadable.
static long long read_cgroup_number(const char * dir, const char * name) {
    FILE * f = open_cgroup_file(dir, name);
    if (f == NULL) {
        return -1;
    }
    long long value = -1;
    if (fscanf(f, "%lld", &value) != 1) {
        value = -1;
    }
    fclose(f);
    return value;
}

// The value of one "KEY N" line of a cgroup file (memory.oom_control's oom_kill, memory.stat's
// total_cache), or -1.
static long long read_cgroup_key(const char * dir, const char * name, const char * wanted) {
    FILE * f = open_cgroup_file(dir, name);
    if (f == NULL) {
        return -1;
    }
    char key[64];
    long long value, found = -1;
    while (fscanf(f, "%63s %lld", key, &value) == 2) {
        if (strcmp(key, wanted) == 0) {
            found = value;
        }
    }
    fclose(f);
    return found;
}

static void print_json_string(FILE * out, const char * s) {
    fputc('"', out);
    for (const unsigned char * p = (const unsigned char *) s; *p; ++p) {
        if (*p == '"' || *p == '\\') {
            fprintf(out, "\\%c", *p);
        } else if (*p < 0x20) {
            fprintf(out, "\\u%04x", *p);
        } else {
            fputc(*p, out);
        }
    }
    fputc('"', out);
}

static void print_number_or_null(FILE * out, const char * key, long long value) {
    if (value < 0) {
        fprintf(out, ",\"%s\":null", key);
    } else {
        fprintf(out, ",\"%s\":%lld", key, value);
    }
}

// In the child: join the cgroup, then exec. Any failure is sent to the parent as an errno value
// through the close-on-exec pipe (a successful exec closes it and the parent reads nothing).
static void child_main(const char * cgroup_dir, char ** argv, int report_fd) {
    int err = 0, stage = 1;  // 1: joining the cgroup, 2: exec
    if (cgroup_dir != NULL) {
        char path[4096];
        if (snprintf(path, sizeof path, "%s/cgroup.procs", cgroup_dir) >= (int) sizeof path) {
            err = ENAMETOOLONG;
        } else {
            int fd = open(path, O_WRONLY | O_CLOEXEC);
            char pid_text[32];
            int n = snprintf(pid_text, sizeof pid_text, "%d\n", (int) getpid());
            if (fd < 0 || write(fd, pid_text, (size_t) n) != n) {
                err = errno != 0 ? errno : EIO;
            }
            if (fd >= 0) {
                close(fd);
            }
        }
    }
    if (err == 0) {
        stage = 2;
        execvp(argv[0], argv);
        err = errno;
    }
    const int code[2] = {stage, err};
    if (write(report_fd, code, sizeof code) < 0) {
        // Nothing more to do: the parent sees a short read and reports an unknown failure.
    }
    _exit(EXIT_SETUP);
}

int main(int argc, char ** argv) {
    const char * out_path = NULL;
    const char * cgroup_dir = NULL;
    unsigned timeout_s = 0;
    int i = 1;
    for (; i < argc; ++i) {
        if (strcmp(argv[i], "--") == 0) {
            ++i;
            break;
        } else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
            out_path = argv[++i];
        } else if (strcmp(argv[i], "--cgroup") == 0 && i + 1 < argc) {
            cgroup_dir = argv[++i];
        } else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) {
            char * end = NULL;
            errno = 0;
            const unsigned long value = strtoul(argv[++i], &end, 10);
            if (errno != 0 || end == argv[i] || *end != '\0' || value == 0 || value > 7 * 24 * 3600) {
                fprintf(stderr, "run_measured: bad --timeout '%s' (seconds, 1..604800)\n", argv[i]);
                return EXIT_SETUP;
            }
            timeout_s = (unsigned) value;
        } else {
            fprintf(stderr, "run_measured: unknown or incomplete option '%s'\n", argv[i]);
            usage();
            return EXIT_SETUP;
        }
    }
    if (i >= argc) {
        fprintf(stderr, "run_measured: no command given\n");
        usage();
        return EXIT_SETUP;
    }
    char ** command = &argv[i];
    FILE * out = stderr;
    if (out_path != NULL && (out = fopen(out_path, "w")) == NULL) {
        fprintf(stderr, "run_measured: cannot write %s: %s\n", out_path, strerror(errno));
        return EXIT_SETUP;
    }
    if (cgroup_dir != NULL && read_cgroup_number(cgroup_dir, "memory.usage_in_bytes") < 0) {
        fprintf(stderr, "run_measured: %s is not a cgroup v1 memory cgroup (no readable memory.usage_in_bytes)\n",
                cgroup_dir);
        return EXIT_SETUP;
    }

    // oom_control's count is the cgroup's total: the run's own kills are the difference.
    const long long oom_kills_before =
        cgroup_dir != NULL ? read_cgroup_key(cgroup_dir, "memory.oom_control", "oom_kill") : -1;
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) {
        fprintf(stderr, "run_measured: pipe: %s\n", strerror(errno));
        return EXIT_SETUP;
    }
    fflush(NULL);
    const struct cpu_ticks cpu0 = read_cpu_ticks();
    const double t0 = now_seconds();
    const pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "run_measured: fork: %s\n", strerror(errno));
        return EXIT_SETUP;
    }
    if (pid == 0) {
        close(report[0]);
        child_main(cgroup_dir, command, report[1]);
    }
    close(report[1]);
    int code[2] = {0, 0};
    ssize_t got;
    do {
        got = read(report[0], code, sizeof code);
    } while (got < 0 && errno == EINTR);
    close(report[0]);
    if (got != 0) {
        const char * what = code[0] == 1 ? "could not join cgroup" : "could not run";
        fprintf(stderr, "run_measured: %s %s: %s\n", what, code[0] == 1 ? cgroup_dir : command[0],
                got == (ssize_t) sizeof code ? strerror(code[1]) : "unknown error");
        waitpid(pid, NULL, 0);
        return EXIT_SETUP;
    }

    if (timeout_s > 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_alarm;
        sigemptyset(&sa.sa_mask);
        g_child = pid;
        sigaction(SIGALRM, &sa, NULL);
        alarm(timeout_s);
    }
    // Wait for the exit without reaping: the zombie's /proc/PID/io is still readable.
    siginfo_t info;
    memset(&info, 0, sizeof info);
    int rc;
    do {
        rc = waitid(P_PID, (id_t) pid, &info, WEXITED | WNOWAIT);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
        fprintf(stderr, "run_measured: waitid: %s\n", strerror(errno));
        return EXIT_SETUP;
    }
    const double wall = now_seconds() - t0;
    alarm(0);
    const struct cpu_ticks cpu1 = read_cpu_ticks();
    const struct io_counters io = read_proc_io(pid);

    struct rusage ru;
    int status = 0;
    pid_t reaped;
    do {
        reaped = wait4(pid, &status, 0, &ru);
    } while (reaped < 0 && errno == EINTR);
    if (reaped != pid) {
        fprintf(stderr, "run_measured: wait4: %s\n", strerror(errno));
        return EXIT_SETUP;
    }

    fprintf(out, "{\"command\":");
    print_json_string(out, command[0]);
    fprintf(out, ",\"pid\":%d", (int) pid);
    if (WIFEXITED(status)) {
        fprintf(out, ",\"exit_code\":%d,\"signal\":null", WEXITSTATUS(status));
    } else {
        fprintf(out, ",\"exit_code\":null,\"signal\":%d", WIFSIGNALED(status) ? WTERMSIG(status) : -1);
    }
    fprintf(out, ",\"timed_out\":%s", g_timed_out ? "true" : "false");
    fprintf(out, ",\"wall_s\":%.3f,\"user_s\":%.3f,\"sys_s\":%.3f", wall,
            (double) ru.ru_utime.tv_sec + (double) ru.ru_utime.tv_usec * 1e-6,
            (double) ru.ru_stime.tv_sec + (double) ru.ru_stime.tv_usec * 1e-6);
    // ru_maxrss is in KiB on Linux.
    fprintf(out, ",\"maxrss_bytes\":%lld,\"major_faults\":%ld,\"minor_faults\":%ld",
            (long long) ru.ru_maxrss * 1024, ru.ru_majflt, ru.ru_minflt);
    if (io.ok) {
        fprintf(out, ",\"io\":{\"rchar\":%llu,\"wchar\":%llu,\"read_bytes\":%llu,\"write_bytes\":%llu"
                     ",\"cancelled_write_bytes\":%llu}",
                io.rchar, io.wchar, io.read_bytes, io.write_bytes, io.cancelled_write_bytes);
    } else {
        fprintf(out, ",\"io\":null");
    }
    if (cpu0.ok && cpu1.ok && cpu1.total > cpu0.total) {
        const double total = (double) (cpu1.total - cpu0.total);
        fprintf(out, ",\"cpu_ticks\":%llu,\"steal_ticks\":%llu,\"iowait_ticks\":%llu"
                     ",\"steal_pct\":%.2f,\"iowait_pct\":%.2f",
                cpu1.total - cpu0.total, cpu1.steal - cpu0.steal, cpu1.iowait - cpu0.iowait,
                100.0 * (double) (cpu1.steal - cpu0.steal) / total, 100.0 * (double) (cpu1.iowait - cpu0.iowait) / total);
    } else {
        fprintf(out, ",\"cpu_ticks\":null,\"steal_ticks\":null,\"iowait_ticks\":null,\"steal_pct\":null,\"iowait_pct\":null");
    }
    if (cgroup_dir != NULL) {
        fprintf(out, ",\"cgroup\":{\"path\":");
        print_json_string(out, cgroup_dir);
        print_number_or_null(out, "limit_bytes", read_cgroup_number(cgroup_dir, "memory.limit_in_bytes"));
        print_number_or_null(out, "max_usage_bytes", read_cgroup_number(cgroup_dir, "memory.max_usage_in_bytes"));
        print_number_or_null(out, "failcnt", read_cgroup_number(cgroup_dir, "memory.failcnt"));
        print_number_or_null(out, "memsw_limit_bytes", read_cgroup_number(cgroup_dir, "memory.memsw.limit_in_bytes"));
        print_number_or_null(out, "memsw_max_usage_bytes",
                             read_cgroup_number(cgroup_dir, "memory.memsw.max_usage_in_bytes"));
        print_number_or_null(out, "memsw_failcnt", read_cgroup_number(cgroup_dir, "memory.memsw.failcnt"));
        const long long oom_kills_after = read_cgroup_key(cgroup_dir, "memory.oom_control", "oom_kill");
        print_number_or_null(out, "oom_kills",
                             oom_kills_before >= 0 && oom_kills_after >= 0 ? oom_kills_after - oom_kills_before : -1);
        print_number_or_null(out, "kmem_max_usage_bytes", read_cgroup_number(cgroup_dir, "memory.kmem.max_usage_in_bytes"));
        // Read after the exit, when the process's anonymous memory is gone: the page cache it
        // left charged to the cgroup (file pages it read through mmap or buffered reads).
        print_number_or_null(out, "cache_after_exit_bytes", read_cgroup_key(cgroup_dir, "memory.stat", "total_cache"));
        fputc('}', out);
    } else {
        fprintf(out, ",\"cgroup\":null");
    }
    fprintf(out, "}\n");
    if (out != stderr && fclose(out) != 0) {
        fprintf(stderr, "run_measured: writing %s failed\n", out_path);
        return EXIT_SETUP;
    }
    if (WIFEXITED(status)) {
        return WEXITSTATUS(status);
    }
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : EXIT_SETUP;
}

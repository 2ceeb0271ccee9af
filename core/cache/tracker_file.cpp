#include "core/cache/tracker_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <stdexcept>

namespace ember::cache {

static_assert(std::endian::native == std::endian::little, "the tracker file is little-endian; add byte swapping");

namespace {

constexpr char kMagic[8] = {'E', 'M', 'B', 'R', 'T', 'R', 'K', '\0'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxLayers = 65536;
constexpr size_t kHeaderBytes = 32;  // magic, version, n_layer, fingerprint, half-life
constexpr size_t kChecksumBytes = 8;

std::string file_error(const std::string& path, const std::string& problem) {
  return "activation tracker file " + path + ": " + problem;
}

std::string errno_text() { return std::strerror(errno); }

std::string hex(uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof(buf), "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// Closes on every path out of save/load.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Appends at a cursor into a buffer sized beforehand (encode() computes the exact size).
struct Writer {
  std::vector<uint8_t>& out;
  size_t at = 0;
  void bytes(const void* p, size_t n) {
    std::memcpy(out.data() + at, p, n);
    at += n;
  }
  template <typename T>
  void put(const T& v) {
    bytes(&v, sizeof(T));
  }
};

template <typename T>
T get(const std::vector<uint8_t>& in, size_t at) {
  T v;
  std::memcpy(&v, in.data() + at, sizeof(T));
  return v;
}

// Reads exactly `bytes` at `offset`; false at end of file.
bool read_at(int fd, uint8_t* dst, size_t bytes, uint64_t offset) {
  while (bytes > 0) {
    const ssize_t n = ::pread(fd, dst, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    dst += n;
    bytes -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return true;
}

uint64_t checked_add(uint64_t a, uint64_t b, const std::string& path) {
  if (a > std::numeric_limits<uint64_t>::max() - b) throw std::runtime_error(file_error(path, "sizes overflow"));
  return a + b;
}

void check_shape(const ActivationTracker& t, const TrackerIdentity& id) {
  if (id.n_ff.size() != t.n_layers()) {
    throw std::invalid_argument("save activation tracker: identity has " + std::to_string(id.n_ff.size()) + " layers, tracker " +
                                std::to_string(t.n_layers()));
  }
  if (id.n_ff.size() > kMaxLayers) throw std::invalid_argument("save activation tracker: more than 65536 layers");
  for (size_t l = 0; l < id.n_ff.size(); ++l) {
    if (id.n_ff[l] != t.n_ff(l)) {
      throw std::invalid_argument("save activation tracker: layer " + std::to_string(l) + " has n_ff " + std::to_string(t.n_ff(l)) +
                                  ", identity " + std::to_string(id.n_ff[l]));
    }
  }
}

std::vector<uint8_t> encode(const ActivationTracker& t, const TrackerIdentity& id) {
  uint64_t counts = 0;
  for (uint32_t n : id.n_ff) counts += n;
  std::vector<uint8_t> out(kHeaderBytes + 4 * id.n_ff.size() + 8 * (id.n_ff.size() + counts) + kChecksumBytes);
  Writer w{out};
  w.bytes(kMagic, sizeof(kMagic));
  w.put(kVersion);
  w.put(static_cast<uint32_t>(id.n_ff.size()));
  w.put(id.fingerprint);
  w.put(t.half_life());
  for (uint32_t n : id.n_ff) w.put(n);
  std::vector<double> layer;
  for (size_t l = 0; l < t.n_layers(); ++l) {
    layer.resize(t.n_ff(l));
    w.put(t.snapshot(l, layer));
    w.bytes(layer.data(), layer.size() * sizeof(double));
  }
  w.put(fnv1a64(std::span<const uint8_t>(out.data(), w.at)));
  return out;
}

void write_all(int fd, const std::vector<uint8_t>& data, const std::string& path, const std::string& tmp) {
  const uint8_t* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error(file_error(path, "cannot write " + tmp + ": " + (n < 0 ? errno_text() : "no progress")));
    p += n;
    left -= static_cast<size_t>(n);
  }
}

// Creates `tmp` as a new file of our own. The state directory may be writable by others (or the
// name guessed: it is the pid), so whatever sits at that name is never opened: O_EXCL fails on any
// existing entry, a symlink included (O_NOFOLLOW says so explicitly), instead of writing through
// it into its target. An entry left there is removed first: only the name, never what a symlink
// points to, and only ours to remove (this pid's temporary name: a crash of an earlier process
// that had the same pid). If something is planted again between the unlink and the open, the open
// fails and the save reports it. Returns the descriptor, or -1 with errno set.
int create_exclusive(const std::string& tmp) {
  if (::unlink(tmp.c_str()) != 0 && errno != ENOENT) return -1;
  return ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
}

}  // namespace

void save_tracker_atomically(const std::string& path, const ActivationTracker& tracker, const TrackerIdentity& identity) {
  check_shape(tracker, identity);
  const std::vector<uint8_t> data = encode(tracker, identity);
  // The pid keeps two processes saving beside each other (e.g. an old daemon still stopping
  // while a new one runs) from writing into the same temporary file.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    Fd f;
    f.fd = create_exclusive(tmp);
    if (f.fd < 0) throw std::runtime_error(file_error(path, "cannot create " + tmp + ": " + errno_text()));
    try {
      write_all(f.fd, data, path, tmp);
      // Durable before the rename: otherwise a crash could leave `path` naming an empty file.
      if (::fsync(f.fd) != 0) throw std::runtime_error(file_error(path, "cannot fsync " + tmp + ": " + errno_text()));
      const int fd = f.fd;
      f.fd = -1;
      if (::close(fd) != 0) throw std::runtime_error(file_error(path, "cannot close " + tmp + ": " + errno_text()));
      if (::rename(tmp.c_str(), path.c_str()) != 0) {
        throw std::runtime_error(file_error(path, "cannot rename " + tmp + " over it: " + errno_text()));
      }
    } catch (...) {
      ::unlink(tmp.c_str());
      throw;
    }
  }
  // The rename itself is durable only once the directory is synced.
  const std::string parent = std::filesystem::path(path).parent_path().string();
  const std::string dir = parent.empty() ? std::string(".") : parent;
  Fd d;
  d.fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d.fd < 0) throw std::runtime_error(file_error(path, "saved, but cannot open its directory to fsync it: " + errno_text()));
  // EINVAL: the file system cannot sync directories; nothing more to do there.
  if (::fsync(d.fd) != 0 && errno != EINVAL) {
    throw std::runtime_error(file_error(path, "saved, but cannot fsync its directory: " + errno_text()));
  }
}

ActivationTracker load_tracker(const std::string& path, const TrackerIdentity& identity) {
  Fd f;
  // O_NONBLOCK: a FIFO at the path must not block the open (the daemon's start) until a writer
  // appears; it is refused as not a regular file just below. Reads of a regular file ignore it.
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (f.fd < 0) throw std::runtime_error(file_error(path, "cannot open: " + errno_text()));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) throw std::runtime_error(file_error(path, "cannot stat: " + errno_text()));
  if (!S_ISREG(st.st_mode)) throw std::runtime_error(file_error(path, "not a regular file"));
  const uint64_t file_bytes = static_cast<uint64_t>(st.st_size);

  std::vector<uint8_t> head(kHeaderBytes);
  if (file_bytes < kHeaderBytes + kChecksumBytes || !read_at(f.fd, head.data(), kHeaderBytes, 0)) {
    throw std::runtime_error(file_error(path, "truncated: " + std::to_string(file_bytes) + " bytes, shorter than a header"));
  }
  if (std::memcmp(head.data(), kMagic, sizeof(kMagic)) != 0) {
    throw std::runtime_error(file_error(path, "not an activation tracker file (bad magic)"));
  }
  const auto version = get<uint32_t>(head, 8);
  if (version != kVersion) {
    throw std::runtime_error(file_error(path, "unsupported version " + std::to_string(version) + " (this build reads " +
                                                  std::to_string(kVersion) + ")"));
  }
  const auto n_layer = get<uint32_t>(head, 12);
  if (n_layer == 0 || n_layer > kMaxLayers) {
    throw std::runtime_error(file_error(path, "n_layer " + std::to_string(n_layer) + " out of range (1 .. 65536)"));
  }
  // The identity is checked before the body is read, so a hostile header cannot make us allocate
  // more than this model's own tracker.
  if (n_layer != identity.n_ff.size()) {
    throw std::runtime_error(file_error(path, "written for another model: " + std::to_string(n_layer) + " layers, this model has " +
                                                  std::to_string(identity.n_ff.size())));
  }
  const auto fingerprint = get<uint64_t>(head, 16);
  if (fingerprint != identity.fingerprint) {
    throw std::runtime_error(file_error(path, "written for another model or pack (fingerprint " + hex(fingerprint) + ", this model's is " +
                                                  hex(identity.fingerprint) + ")"));
  }
  const uint64_t table_end = kHeaderBytes + 4ull * n_layer;
  if (file_bytes < table_end + kChecksumBytes) {
    throw std::runtime_error(file_error(path, "truncated: " + std::to_string(file_bytes) + " bytes, the layer table ends at " +
                                                  std::to_string(table_end)));
  }
  std::vector<uint8_t> data(table_end);
  if (!read_at(f.fd, data.data(), table_end, 0)) throw std::runtime_error(file_error(path, "truncated while reading the layer table"));
  uint64_t expected = table_end;
  for (uint32_t l = 0; l < n_layer; ++l) {
    const auto n_ff = get<uint32_t>(data, kHeaderBytes + 4ull * l);
    if (n_ff == 0 || n_ff > static_cast<uint32_t>(std::numeric_limits<int32_t>::max())) {
      throw std::runtime_error(file_error(path, "layer " + std::to_string(l) + " has n_ff " + std::to_string(n_ff) + " (1 .. INT32_MAX)"));
    }
    if (n_ff != identity.n_ff[l]) {
      throw std::runtime_error(file_error(path, "written for another model: layer " + std::to_string(l) + " has n_ff " +
                                                    std::to_string(n_ff) + ", this model " + std::to_string(identity.n_ff[l])));
    }
    expected = checked_add(expected, 8 + 8ull * n_ff, path);
  }
  expected = checked_add(expected, kChecksumBytes, path);
  if (file_bytes != expected) {
    throw std::runtime_error(file_error(path, (file_bytes < expected ? "truncated: " : "trailing data: ") + std::to_string(file_bytes) +
                                                  " bytes, its header describes " + std::to_string(expected)));
  }
  data.resize(expected);
  if (!read_at(f.fd, data.data() + table_end, expected - table_end, table_end)) {
    throw std::runtime_error(file_error(path, "truncated while reading (the file shrank)"));
  }
  const uint64_t body = expected - kChecksumBytes;
  if (fnv1a64(std::span<const uint8_t>(data.data(), body)) != get<uint64_t>(data, body)) {
    throw std::runtime_error(file_error(path, "checksum mismatch (the file is corrupt)"));
  }

  const auto half_life = get<double>(head, 24);
  if (!(half_life >= 1.0)) {
    throw std::runtime_error(file_error(path, "half-life " + std::to_string(half_life) + " tokens (must be >= 1)"));
  }
  ActivationTracker tracker(identity.n_ff, half_life);
  std::vector<double> counts;
  uint64_t at = table_end;
  for (uint32_t l = 0; l < n_layer; ++l) {
    const auto tokens = get<double>(data, at);
    at += 8;
    counts.resize(identity.n_ff[l]);
    std::memcpy(counts.data(), data.data() + at, counts.size() * sizeof(double));
    at += counts.size() * sizeof(double);
    try {
      tracker.restore(l, counts, tokens);  // checks NaN, negative, count above the token weight
    } catch (const std::invalid_argument& e) {
      std::string what = e.what();
      const std::string prefix = "activation tracker: restore: ";
      if (what.starts_with(prefix)) what.erase(0, prefix.size());
      throw std::runtime_error(file_error(path, what));
    }
  }
  return tracker;
}

}  // namespace ember::cache

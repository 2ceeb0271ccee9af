// cache::save_tracker_atomically / load_tracker: the round trip, replacing a file atomically (a
// failed save leaves the old file as it was and no temporary behind), and each error a damaged,
// hostile or foreign file gets.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/cache/tracker_file.h"

using namespace ember::cache;
using ember::fnv1a64;
using ember::kFnv1a64Offset;
namespace fs = std::filesystem;

namespace {

// A fresh directory per test case, removed at the end.
struct TempDir {
  fs::path dir;
  explicit TempDir(const std::string& name)
      : dir(fs::temp_directory_path() / ("ember-tracker-" + name + "-" + std::to_string(::getpid()))) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string file(const std::string& name) const { return (dir / name).string(); }
};

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

const TrackerIdentity kIdentity{{5, 3}, 0x1234abcdull};

ActivationTracker sample_tracker() {
  ActivationTracker t(kIdentity.n_ff, 123.0);
  const std::vector<float> prior = {0.9f, 0.6f, 0.3f, 0.1f, 0.0f};
  t.seed(0, prior, 123.0);
  const std::vector<int32_t> a = {4, 1};
  const std::vector<int32_t> b = {2};
  for (int i = 0; i < 300; ++i) {
    t.record(0, a);
    t.record(1, b);
  }
  return t;
}

std::string load_error(const std::string& path, const TrackerIdentity& id = kIdentity) {
  try {
    load_tracker(path, id);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(loaded)";
}

// Offsets from the format in tracker_file.h, for kIdentity (n_ff 5 and 3).
constexpr size_t kTable = 32;
constexpr size_t kLayer0 = kTable + 2 * 4;  // token weight, then 5 counts
constexpr size_t kLayer1 = kLayer0 + 8 + 5 * 8;
constexpr size_t kChecksum = kLayer1 + 8 + 3 * 8;

template <typename T>
void patch(std::vector<uint8_t>& bytes, size_t at, T value) {
  std::memcpy(bytes.data() + at, &value, sizeof(T));
}

// Writes `bytes` with its checksum recomputed, so that the value checks behind it are reached.
void write_resealed(const std::string& path, std::vector<uint8_t> bytes) {
  const size_t body = bytes.size() - 8;
  patch(bytes, body, fnv1a64(std::span<const uint8_t>(bytes.data(), body)));
  write_bytes(path, bytes);
}

}  // namespace

TEST_CASE("tracker file: round trip") {
  TempDir tmp("roundtrip");
  const std::string path = tmp.file("tracker.bin");
  ActivationTracker t = sample_tracker();
  save_tracker_atomically(path, t, kIdentity);
  CHECK(fs::file_size(path) == kChecksum + 8);

  ActivationTracker u = load_tracker(path, kIdentity);
  CHECK(u.n_layers() == 2);
  CHECK(u.half_life() == 123.0);
  for (size_t l = 0; l < 2; ++l) {
    CHECK(u.tokens(l) == t.tokens(l));
    for (uint32_t b = 0; b < t.n_ff(l); ++b) CHECK(u.count(l, b) == t.count(l, b));
  }
  // Both go on the same way (the loaded one's internal scale starts at 1: equal up to rounding).
  const std::vector<int32_t> a = {0};
  for (int i = 0; i < 50; ++i) {
    t.record(0, a);
    u.record(0, a);
  }
  std::vector<float> ft(5), fu(5);
  t.frequency(0, ft);
  u.frequency(0, fu);
  for (size_t b = 0; b < 5; ++b) CHECK(fu[b] == doctest::Approx(ft[b]).epsilon(1e-6));

  // An empty tracker and an infinite half-life survive too.
  ActivationTracker empty(kIdentity.n_ff, std::numeric_limits<double>::infinity());
  save_tracker_atomically(path, empty, kIdentity);
  ActivationTracker e = load_tracker(path, kIdentity);
  CHECK(std::isinf(e.half_life()));
  CHECK(e.tokens(0) == 0.0);
}

TEST_CASE("tracker file: saving replaces the file and leaves no temporary behind") {
  TempDir tmp("replace");
  const std::string path = tmp.file("tracker.bin");
  write_bytes(path, {'o', 'l', 'd'});
  save_tracker_atomically(path, sample_tracker(), kIdentity);
  CHECK(load_error(path) == "(loaded)");
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(tmp.dir)) ++entries;
  CHECK(entries == 1);

  // A bare file name saves into the current directory (its directory is ".").
  const fs::path cwd = fs::current_path();
  fs::current_path(tmp.dir);
  save_tracker_atomically("bare.bin", sample_tracker(), kIdentity);
  fs::current_path(cwd);
  CHECK(fs::exists(tmp.dir / "bare.bin"));
}

TEST_CASE("tracker file: a failed save leaves the old file intact") {
  TempDir tmp("failed");
  const std::string path = tmp.file("tracker.bin");
  save_tracker_atomically(path, sample_tracker(), kIdentity);
  const std::vector<uint8_t> old = read_bytes(path);

  SUBCASE("the temporary file cannot be created") {
    // Tests run as root here, so a read-only directory would not stop the write; a directory
    // squatting on the temporary name does, for anyone.
    const std::string squatter = path + ".tmp." + std::to_string(::getpid());
    fs::create_directory(squatter);
    ActivationTracker other(kIdentity.n_ff);
    try {
      save_tracker_atomically(path, other, kIdentity);
      FAIL("saved");
    } catch (const std::runtime_error& e) {
      CHECK(std::string(e.what()).find("cannot create " + squatter) != std::string::npos);
      CHECK(std::string(e.what()).find("activation tracker file " + path) == 0);
    }
    CHECK(read_bytes(path) == old);
    CHECK(fs::is_directory(squatter));  // not ours: left alone
  }
  SUBCASE("the directory does not exist") {
    const std::string missing = tmp.file("no/such/dir/tracker.bin");
    CHECK_THROWS_AS(save_tracker_atomically(missing, sample_tracker(), kIdentity), std::runtime_error);
    CHECK(read_bytes(path) == old);
  }
  SUBCASE("the rename fails: the temporary file is removed") {
    const std::string blocked = tmp.file("blocked");
    fs::create_directories(fs::path(blocked) / "inside");  // a non-empty directory cannot be renamed over
    try {
      save_tracker_atomically(blocked, sample_tracker(), kIdentity);
      FAIL("saved");
    } catch (const std::runtime_error& e) {
      CHECK(std::string(e.what()).find("cannot rename") != std::string::npos);
    }
    CHECK(!fs::exists(blocked + ".tmp." + std::to_string(::getpid())));
    CHECK(read_bytes(path) == old);
  }
  SUBCASE("the tracker does not match the identity") {
    const TrackerIdentity wrong{{5, 4}, kIdentity.fingerprint};
    CHECK_THROWS_AS(save_tracker_atomically(path, sample_tracker(), wrong), std::invalid_argument);
    CHECK(read_bytes(path) == old);
  }
}

TEST_CASE("tracker file: a symlink planted at the temporary name is not followed") {
  TempDir tmp("symlink");
  const std::string path = tmp.file("tracker.bin");
  const std::string tmp_name = path + ".tmp." + std::to_string(::getpid());
  const std::vector<uint8_t> precious = {'k', 'e', 'e', 'p'};

  SUBCASE("to an existing file: it keeps its bytes") {
    const std::string target = tmp.file("precious");
    write_bytes(target, precious);
    fs::create_symlink(target, tmp_name);
    save_tracker_atomically(path, sample_tracker(), kIdentity);
    CHECK(read_bytes(target) == precious);
    CHECK(!fs::is_symlink(path));  // the renamed entry is our own new file, not the planted link
  }
  SUBCASE("dangling: its target is not created") {
    const std::string target = tmp.file("created-through-the-link");
    fs::create_symlink(target, tmp_name);
    save_tracker_atomically(path, sample_tracker(), kIdentity);
    CHECK(!fs::exists(target));
    CHECK(!fs::is_symlink(path));
  }
  SUBCASE("a stale regular file of ours (an earlier process with this pid) is replaced") {
    write_bytes(tmp_name, precious);
    save_tracker_atomically(path, sample_tracker(), kIdentity);
  }
  CHECK(load_error(path) == "(loaded)");
  CHECK(!fs::exists(fs::symlink_status(tmp_name)));  // nothing left at the temporary name
}

TEST_CASE("tracker file: a FIFO at the path is refused at once, not waited on") {
  TempDir tmp("fifo");
  const std::string path = tmp.file("tracker.bin");
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  // Before the fix the open blocked until a writer appeared: run it aside, and unblock it by
  // opening the FIFO for writing if it is still stuck after a while.
  auto loading = std::async(std::launch::async, [&] { return load_error(path); });
  if (loading.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
    FAIL("load_tracker blocked on a FIFO");
  }
  CHECK(loading.get().find("not a regular file") != std::string::npos);
}

TEST_CASE("tracker file: foreign, damaged and hostile files") {
  TempDir tmp("corrupt");
  const std::string good_path = tmp.file("good.bin");
  save_tracker_atomically(good_path, sample_tracker(), kIdentity);
  const std::vector<uint8_t> good = read_bytes(good_path);
  REQUIRE(good.size() == kChecksum + 8);
  const std::string path = tmp.file("bad.bin");
  const auto error_with = [&](const std::vector<uint8_t>& bytes) {
    write_bytes(path, bytes);
    return load_error(path);
  };
  const auto resealed_error = [&](const std::vector<uint8_t>& bytes) {
    write_resealed(path, bytes);
    return load_error(path);
  };
  const auto has = [](const std::string& message, const std::string& part) {
    CAPTURE(message);
    CHECK(message.find(part) != std::string::npos);
    CHECK(message.find("activation tracker file ") == 0);
  };

  has(load_error(tmp.file("missing.bin")), "cannot open: No such file");
  has(load_error(tmp.dir.string()), "not a regular file");
  has(error_with({}), "truncated: 0 bytes");
  has(error_with(std::vector<uint8_t>(good.begin(), good.begin() + 39)), "truncated: 39 bytes");

  std::vector<uint8_t> b = good;
  b[0] = 'X';
  has(error_with(b), "bad magic");

  b = good;
  patch<uint32_t>(b, 8, 2);
  has(error_with(b), "unsupported version 2");

  b = good;
  patch<uint32_t>(b, 12, 0);
  has(error_with(b), "n_layer 0 out of range");
  patch<uint32_t>(b, 12, 70000);
  has(error_with(b), "n_layer 70000 out of range");
  patch<uint32_t>(b, 12, 3);
  has(error_with(b), "written for another model: 3 layers, this model has 2");

  const TrackerIdentity other_pack{kIdentity.n_ff, 0x99};
  has(load_error(good_path, other_pack), "fingerprint 0x000000001234abcd, this model's is 0x0000000000000099");
  const TrackerIdentity other_shape{{5, 4}, kIdentity.fingerprint};
  has(load_error(good_path, other_shape), "layer 1 has n_ff 3, this model 4");

  b = good;
  patch<uint32_t>(b, kTable + 4, 0);
  has(error_with(b), "layer 1 has n_ff 0");
  patch<uint32_t>(b, kTable + 4, 0xffffffffu);
  has(error_with(b), "layer 1 has n_ff 4294967295");

  has(error_with(std::vector<uint8_t>(good.begin(), good.end() - 1)), "truncated: 127 bytes, its header describes 128");
  b = good;
  b.push_back(0);
  has(error_with(b), "trailing data: 129 bytes");

  b = good;
  b[kLayer0 + 8] ^= 1;  // a flipped bit in a count
  has(error_with(b), "checksum mismatch");

  b = good;
  patch(b, 24, std::nan(""));
  has(resealed_error(b), "half-life nan");
  patch(b, 24, 0.5);
  has(resealed_error(b), "half-life 0.5");

  b = good;
  patch(b, kLayer1, std::nan(""));
  has(resealed_error(b), "layer 1: token weight nan");
  patch(b, kLayer1, -1.0);
  has(resealed_error(b), "layer 1: token weight -1");

  b = good;
  patch(b, kLayer0 + 8 + 3 * 8, std::nan(""));
  has(resealed_error(b), "layer 0 bundle 3: count nan");
  patch(b, kLayer0 + 8 + 3 * 8, -0.5);
  has(resealed_error(b), "layer 0 bundle 3: count -0.5");
  patch(b, kLayer0 + 8 + 3 * 8, 1e9);
  has(resealed_error(b), "layer 0 bundle 3: count 1000000000");
  has(resealed_error(b), "above the layer's token weight");

  // The good file still loads after all that.
  CHECK(load_error(good_path) == "(loaded)");
}

TEST_CASE("tracker file: fnv1a64 chains") {
  const std::vector<uint8_t> ab = {'a', 'b'};
  const std::vector<uint8_t> a = {'a'};
  const std::vector<uint8_t> b = {'b'};
  CHECK(fnv1a64(ab) == fnv1a64(b, fnv1a64(a)));
  CHECK(fnv1a64(a) == 0xaf63dc4c8601ec8cull);  // the published FNV-1a 64 of "a"
  CHECK(fnv1a64(std::span<const uint8_t>{}) == kFnv1a64Offset);
}

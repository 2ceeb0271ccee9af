// `ember pack` and `ember pack --verify` from the command line: the summary line, exit codes,
// one-line errors, and `ember run` giving the same text on a pack as on its source.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

#include "core/gguf/gguf_file.h"

namespace {

struct Result {
  int exit_code;
  std::string out;
};

Result run_ember(const std::string& args, const std::string& stderr_to = "/dev/null") {
  const std::string cmd = std::string(EMBER_BINARY) + " " + args + " 2>" + stderr_to;
  Result r{-1, {}};
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("ember pack writes a pack that verifies, runs like its source, and --verify catches damage") {
  const std::string dir = "/tmp/ember-pack-cli-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string src = dir + "/m.gguf", pk = dir + "/m.pack.gguf", err = dir + "/err";
  REQUIRE(run_ember("synth --preset tiny --type Q8_0 --activation relu --predictor -q -o " + src).exit_code == 0);

  Result r = run_ember("pack -m " + src + " -o " + pk, err);
  CHECK(r.exit_code == 0);
  CHECK(has(r.out, "wrote " + pk + ": 2 layers x 768 bundles"));
  CHECK(has(r.out, "gate Q8_0, up Q8_0, down F16"));
  std::string progress;
  if (FILE* f = std::fopen(err.c_str(), "rb")) {
    std::array<char, 4096> buf;
    progress.assign(buf.data(), std::fread(buf.data(), 1, buf.size(), f));
    std::fclose(f);
  }
  CHECK(has(progress, "pack: layer 2/2"));

  r = run_ember("pack --verify -q -m " + src + " " + pk);
  CHECK(r.exit_code == 0);
  CHECK(has(r.out, "1536 bundles checked against " + src + ": 0 mismatches"));

  for (const char* mode : {"dense", "oracle", "predictor"}) {
    CAPTURE(mode);
    const std::string args = std::string(" -p 'Once upon a time' -n 24 --temp 0 --sparse ") + mode;
    const Result a = run_ember("run -m " + src + args), b = run_ember("run -m " + pk + args);
    CHECK(a.exit_code == 0);
    CHECK(!a.out.empty());
    CHECK(a.out == b.out);
  }

  // One byte of layer 1's bundle 5.
  {
    const auto g = ember::gguf::GgufFile::open(pk);
    const ember::gguf::TensorInfo* t = g.find_tensor("blk.1.ffn_bundles");
    REQUIRE(t != nullptr);
    const long at = static_cast<long>(t->offset + 5 * t->ne[0] + 7);
    FILE* f = std::fopen(pk.c_str(), "r+b");
    REQUIRE(f != nullptr);
    std::fseek(f, at, SEEK_SET);
    const int c = std::fgetc(f);
    std::fseek(f, at, SEEK_SET);
    std::fputc(c ^ 0x20, f);
    std::fclose(f);
  }
  r = run_ember("pack --verify -q -m " + src + " " + pk);
  CHECK(r.exit_code == 1);
  CHECK(has(r.out, ": 1 mismatch\n"));
  CHECK(has(r.out, "  blk.1.ffn_bundles: bundle 5 (neuron 5): gate row differs"));

  r = run_ember("pack -m " + src, err);  // no -o
  CHECK(r.exit_code != 0);
  r = run_ember("pack -m " + pk + " -o " + dir + "/again.gguf", err);  // a pack as source
  CHECK(r.exit_code == 1);
  std::string e;
  if (FILE* f = std::fopen(err.c_str(), "rb")) {
    std::array<char, 4096> buf;
    e.assign(buf.data(), std::fread(buf.data(), 1, buf.size(), f));
    std::fclose(f);
  }
  CHECK(has(e, "ember: error: "));
  CHECK(has(e, "is already a pack"));
  std::filesystem::remove_all(dir);
}

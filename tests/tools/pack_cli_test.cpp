// `ember pack` and `ember pack --verify` from the command line: the summary line, exit codes,
// one-line errors, and `ember run` giving the same text on a pack as on its source.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "core/gguf/gguf_file.h"
#include "tests/tools/run_ember.h"

namespace {

using Result = ember::test::EmberRun;
using ember::test::run_ember;

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("ember pack writes a pack that verifies, runs like its source, and --verify catches damage") {
  const std::string dir = "/tmp/ember-pack-cli-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string src = dir + "/m.gguf", pk = dir + "/m.pack.gguf";
  REQUIRE(run_ember("synth --preset tiny --type Q8_0 --activation relu --predictor -q -o " + src).exit_code == 0);

  Result r = run_ember("pack -m " + src + " -o " + pk);
  CHECK(r.exit_code == 0);
  CHECK(has(r.out, "wrote " + pk + ": 2 layers x 768 bundles"));
  CHECK(has(r.out, "gate Q8_0, up Q8_0, down F16"));
  CHECK(has(r.err, "pack: layer 2/2"));  // the progress

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

  r = run_ember("pack -m " + src);  // no -o
  CHECK(r.exit_code != 0);
  r = run_ember("pack -m " + pk + " -o " + dir + "/again.gguf");  // a pack as source
  CHECK(r.exit_code == 1);
  CHECK(has(r.err, "ember: error: "));
  CHECK(has(r.err, "is already a pack"));
  std::filesystem::remove_all(dir);
}

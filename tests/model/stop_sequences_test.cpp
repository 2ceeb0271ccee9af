// Stop sequences over streamed text: never released, held back while undecided, flushed at the end.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/model/stop_sequences.h"

namespace ember {
namespace {

struct Fed {
  std::vector<std::string> released;  // per push
  std::string all;
  bool matched = false;
};

Fed feed(StopSequenceMatcher& m, const std::vector<std::string>& pieces, bool flush_at_end = true) {
  Fed f;
  for (const auto& p : pieces) {
    std::string out;
    f.matched = m.push(p, out);
    f.released.push_back(out);
    f.all += out;
    if (f.matched) break;
  }
  if (!f.matched && flush_at_end) m.flush(f.all);
  return f;
}

}  // namespace

TEST_CASE("stop sequences: no stops pass everything through") {
  StopSequenceMatcher m;
  auto f = feed(m, {"a", "bc", ""});
  CHECK(f.all == "abc");
  CHECK(f.released[0] == "a");
  CHECK(!f.matched);
  StopSequenceMatcher only_empty({""});
  CHECK(only_empty.empty());
}

TEST_CASE("stop sequences: a match inside one piece cuts the text there") {
  StopSequenceMatcher m({"END"});
  auto f = feed(m, {"hello END world"});
  CHECK(f.matched);
  CHECK(f.all == "hello ");
  std::string more;
  CHECK(m.push("x", more));  // stays matched, releases nothing
  CHECK(more.empty());
}

TEST_CASE("stop sequences: across token boundaries, undecided text is held back") {
  StopSequenceMatcher m({"\n\nUser:"});
  auto f = feed(m, {"Sure", ".\n", "\nUs", "er", ":", " more"});
  CHECK(f.matched);
  CHECK(f.all == "Sure.");
  CHECK(f.released[0] == "Sure");
  CHECK(f.released[1] == ".");  // "\n" could start the stop string
  CHECK(f.released[2].empty());
  CHECK(f.released[3].empty());
  CHECK(f.released[4].empty());
}

TEST_CASE("stop sequences: a false start is released once it is decided") {
  StopSequenceMatcher m({"abc"});
  auto f = feed(m, {"xa", "b", "d", "ab"});
  CHECK(!f.matched);
  CHECK(f.released[0] == "x");
  CHECK(f.released[1].empty());
  CHECK(f.released[2] == "abd");
  CHECK(f.released[3].empty());
  CHECK(f.all == "xabdab");  // the flush releases the held "ab"
}

TEST_CASE("stop sequences: overlapping candidates and the earliest match") {
  StopSequenceMatcher m({"aab", "b c"});
  auto f = feed(m, {"a", "a", "a", "b c"});
  CHECK(f.matched);
  CHECK(f.all == "a");  // "aab" starts at index 1, before "b c" at 3
  StopSequenceMatcher m2({"ana"});
  auto f2 = feed(m2, {"ban", "an", "a"});
  CHECK(f2.matched);
  CHECK(f2.all == "b");
}

TEST_CASE("stop sequences: several stops, the first to appear wins") {
  StopSequenceMatcher m({"STOP", "\n"});
  auto f = feed(m, {"one ST", "two\nSTOP"});
  CHECK(f.matched);
  CHECK(f.all == "one STtwo");
}

TEST_CASE("stop sequences: multi-byte UTF-8 is cut only at character boundaries") {
  // "é" = C3 A9, "日本" = E6 97 A5 E6 9C AC
  StopSequenceMatcher m({"\xE6\x97\xA5\xE6\x9C\xAC"});
  auto f = feed(m, {"caf\xC3\xA9 ", "\xE6\x97\xA5", "\xE6\x9C", "\xAC!"});
  CHECK(f.matched);
  CHECK(f.all == "caf\xC3\xA9 ");
  // A stop that shares a first byte with the text but not the character: released whole.
  StopSequenceMatcher m2({"\xC3\xA8x"});  // "èx"
  auto f2 = feed(m2, {"\xC3\xA9", "\xC3\xA8", "y"});
  CHECK(!f2.matched);
  CHECK(f2.released[0] == "\xC3\xA9");
  CHECK(f2.released[1].empty());
  CHECK(f2.released[2] == "\xC3\xA8y");
}

TEST_CASE("stop sequences: held-back text is flushed at the end, once") {
  StopSequenceMatcher m({"</s>"});
  auto f = feed(m, {"text</"});
  CHECK(!f.matched);
  CHECK(f.released[0] == "text");
  CHECK(f.all == "text</");
  CHECK(m.held_bytes() == 0);
  std::string again;
  m.flush(again);
  CHECK(again.empty());
}

}  // namespace ember

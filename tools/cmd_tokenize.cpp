// `ember tokenize`: one line of space-separated token ids for a text, using the model's tokenizer
// (no BOS/EOS, special-token texts are plain text unless asked).
#include <cstdio>
#include <string>

#include "core/gguf/gguf_file.h"
#include "core/tokenizer/tokenizer.h"
#include "tools/subcommands.h"

namespace ember::cli {

void register_tokenize(CLI::App& app, int& exit_code) {
  struct Options {
    std::string model;
    std::string text;
    bool bos = false;
    bool parse_special = false;
    bool pieces = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("tokenize", "Print the token ids of a text (one line, space separated)");
  sub->add_option("-m,--model", o->model, "Model or vocabulary file (GGUF)")->required()->check(CLI::ExistingFile);
  sub->add_option("text", o->text, "Text to tokenize")->required();
  sub->add_flag("--bos", o->bos, "Add BOS (and EOS) as the model's metadata says");
  sub->add_flag("--parse-special", o->parse_special, "Recognise special-token texts such as <s> in the text");
  sub->add_flag("--pieces", o->pieces, "Print id:'piece' pairs instead of bare ids");
  sub->callback([o, &exit_code] {
    // Only the metadata is needed: vocab-only files (no tensors) work too.
    gguf::GgufFile file = gguf::GgufFile::open(o->model);
    Tokenizer tok = Tokenizer::from_gguf(file.metadata());
    std::vector<int32_t> ids = tok.encode(o->text, o->bos, o->parse_special);
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) line += ' ';
      line += std::to_string(ids[i]);
      if (o->pieces) line += ":'" + tok.token_to_piece(ids[i], true) + "'";
    }
    std::printf("%s\n", line.c_str());
    exit_code = 0;
  });
}

}  // namespace ember::cli

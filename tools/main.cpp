// `ember`: the one command-line front end. Subcommands are thin layers over core/.
#include <cstdio>
#include <exception>

#include "tools/subcommands.h"

int main(int argc, char** argv) {
  CLI::App app{"Ember: local LLM inference for devices whose memory is smaller than the model"};
  app.require_subcommand(1);
  int exit_code = 0;
  ember::cli::register_run(app, exit_code);
  ember::cli::register_tokenize(app, exit_code);
  ember::cli::register_synth(app, exit_code);
  ember::cli::register_bench(app, exit_code);
  ember::cli::register_serve(app, exit_code);
  ember::cli::register_pack(app, exit_code);
  ember::cli::register_profile(app, exit_code);
  ember::cli::register_eval(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and friends print through CLI11; real errors are one line, like every other error.
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "ember: error: %s\n", e.what());
    return e.get_exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember: error: %s\n", e.what());
    return 1;
  }
  return exit_code;
}

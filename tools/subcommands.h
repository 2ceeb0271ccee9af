#pragma once
// Each `ember SUB` lives in its own tools/cmd_SUB.cpp and registers itself here. A subcommand sets
// exit_code from its callback; errors are caught in main() and printed as one line.
#include <CLI/CLI.hpp>

namespace ember::cli {

void register_run(CLI::App& app, int& exit_code);
void register_tokenize(CLI::App& app, int& exit_code);
void register_synth(CLI::App& app, int& exit_code);
void register_bench(CLI::App& app, int& exit_code);
void register_serve(CLI::App& app, int& exit_code);
void register_pack(CLI::App& app, int& exit_code);
void register_profile(CLI::App& app, int& exit_code);
void register_eval(CLI::App& app, int& exit_code);

}  // namespace ember::cli

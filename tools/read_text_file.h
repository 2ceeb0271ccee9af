#pragma once
// Whole text files for the commands: reading -f (run, profile, eval) and bench --prompt-file,
// writing reports; the error names the file and what it was for.
#include <string>

namespace ember::cli {

std::string read_text_file(const std::string& path, const char* what);
void write_text_file(const std::string& path, const std::string& text, const char* what);

}  // namespace ember::cli

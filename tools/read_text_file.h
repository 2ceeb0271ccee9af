#pragma once
// Reads a whole text file for the commands that take -f (run, profile, eval); the error names the
// file and what it was for.
#include <string>

namespace ember::cli {

std::string read_text_file(const std::string& path, const char* what);

}  // namespace ember::cli

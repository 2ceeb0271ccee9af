#include "tools/read_text_file.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace ember::cli {

std::string read_text_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(std::string("cannot read ") + what + " '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw std::runtime_error(std::string("error reading ") + what + " '" + path + "'");
  return ss.str();
}

void write_text_file(const std::string& path, const std::string& text, const char* what) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error(std::string("cannot write ") + what + " '" + path + "'");
  out << text;
  if (!out) throw std::runtime_error(std::string("writing ") + what + " '" + path + "' failed");
}

}  // namespace ember::cli

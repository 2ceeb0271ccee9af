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

}  // namespace ember::cli

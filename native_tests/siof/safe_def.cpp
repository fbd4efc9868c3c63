// Never a finding: construct on first use, and constant initialization (constinit, constexpr).
#include "cfg.hpp"
Config& config() {
  static Config c;  // a function-local static: built on first use, thread-safe since C++11
  return c;
}
constinit int g_constinit = 5;
constexpr int kConstexpr = 7;
int constexpr_value() { return kConstexpr; }

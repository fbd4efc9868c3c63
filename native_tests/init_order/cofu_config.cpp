// The fix: construct on first use. The Config lives in a function-local static, built (thread-safely, since
// C++11) the first time config() is called, whatever the link order. This TU has no static initializer at all.
#include "config.hpp"
#include "trace.h"

Config::Config() : port(8080) { trace("mark", "config-constructed"); }
Config::~Config() { trace("dtor", "cofu_config"); }

Config &config() {
  static Config c;
  return c;
}

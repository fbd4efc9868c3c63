// The fiasco, part 2: this TU's global reads g_config while it is constructed. Whether g_config is built yet
// depends only on which object file the linker saw first: 8080 when siof_config.o comes first, 0 (the
// zero-initialized storage) when siof_user.o does.
#include "config.hpp"
#include "trace.h"

namespace {
struct User {
  User() : saw(g_config.port) {
    trace("init", "siof_user.cpp");
    trace_value("user-saw-port", saw);
  }
  int saw;
};
User user;
}  // namespace

int user_saw_port() { return user.saw; }

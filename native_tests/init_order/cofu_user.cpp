// The same user as siof_user.cpp, reading the configuration through config(): 8080 in both link orders.
#include "config.hpp"
#include "trace.h"

namespace {
struct User {
  User() : saw(config().port) {
    trace("init", "cofu_user.cpp");
    trace_value("user-saw-port", saw);
  }
  int saw;
};
User user;
}  // namespace

int user_saw_port() { return user.saw; }

// Reads another unit's global while it is constructed: before-construction when linked first.
#include "cfg.hpp"
struct User {
  User() : saw(g_config.port) {}
  int saw;
};
User g_user;

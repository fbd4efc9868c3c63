#include "cfg.hpp"
Config& config();
extern constinit int g_constinit;
int constexpr_value();
struct SafeUser {
  SafeUser() : saw(config().port + g_constinit + constexpr_value()) {}
  int saw;
};
SafeUser g_safe_user;

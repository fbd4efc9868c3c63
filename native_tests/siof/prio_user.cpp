#include "cfg.hpp"
extern Config g_early_cfg;
struct PrioUser {
  PrioUser() : saw(g_early_cfg.port) {}
  int saw;
};
PrioUser g_prio_user;

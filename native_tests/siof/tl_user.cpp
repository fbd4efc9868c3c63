#include "cfg.hpp"
extern thread_local Config t_config;
struct TlUser {
  TlUser() : saw(t_config.port) {}
  int saw;
};
TlUser g_tl_user;

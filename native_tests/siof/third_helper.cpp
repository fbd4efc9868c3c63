#include "cfg.hpp"
int config_port() { return g_config.port; }  // a third unit: the read is one call away

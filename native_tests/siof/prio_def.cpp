#include "cfg.hpp"
Config g_early_cfg __attribute__((init_priority(200)));  // built before every default-priority initializer

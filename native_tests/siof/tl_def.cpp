#include "cfg.hpp"
thread_local Config t_config;  // built on first use in each thread, through its TLS wrapper

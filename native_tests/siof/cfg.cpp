#include "cfg.hpp"
Config::Config() : port(8080) {}
Config g_config;

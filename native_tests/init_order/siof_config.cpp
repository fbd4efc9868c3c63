// The static initialization order fiasco, part 1: a global with a dynamic initializer.
#include "config.hpp"
#include "trace.h"

Config g_config;

Config::Config() : port(8080) { trace("init", "siof_config.cpp"); }
Config::~Config() { trace("dtor", "siof_config.cpp"); }

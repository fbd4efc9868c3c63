// The order fixtures' shared type: a global with a dynamic initializer (its constructor runs in an
// initializer, not at compile time).
#pragma once
struct Config {
  Config();
  int port;
};
extern Config g_config;  // cfg.cpp

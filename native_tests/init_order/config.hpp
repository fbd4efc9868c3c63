// A configuration object that another translation unit's global reads while it is being initialized.
#ifndef INIT_ORDER_CONFIG_HPP
#define INIT_ORDER_CONFIG_HPP
struct Config {
  Config();  // not constexpr, and it traces: a dynamic initializer, run from the TU's _GLOBAL__sub_I_
  ~Config();
  int port;
};

extern Config g_config;  // siof_config.cpp: a plain global (the fiasco)
Config &config();        // cofu_config.cpp: construct on first use (the fix)

int user_saw_port();
void trace_value(const char *key, long value);
#endif

// A table built on first use by whichever caller comes first, behind a plain flag (protobuf's shared
// defaults have this shape): no initializer of its own.
#include "place.hpp"
int g_defaults[kDefaults];
static bool g_defaults_ready;
static volatile int base = 5;
__attribute__((noinline)) void init_defaults() {
  if (g_defaults_ready) return;
  for (int i = 0; i < kDefaults; ++i) g_defaults[i] = base + i;
  g_defaults_ready = true;
}

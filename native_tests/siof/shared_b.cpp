// Builds the shared table (init_defaults) before reading it: safe in any link order.
#include "place.hpp"
struct DefaultsB {
  DefaultsB() { init_defaults(); saw = g_defaults[2]; }
  int saw;
};
DefaultsB g_defaults_b;

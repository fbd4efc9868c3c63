// Builds the shared table (init_defaults) before reading it: safe in any link order.
#include "place.hpp"
struct DefaultsA {
  DefaultsA() { init_defaults(); saw = g_defaults[1]; }
  int saw;
};
DefaultsA g_defaults_a;

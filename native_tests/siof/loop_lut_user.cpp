// Reads another unit's table, filled by a function its initializer calls, linked first: it still holds zeros.
#include "loop.hpp"
struct LutUser {
  LutUser() : saw(g_lut[7]) {}
  int saw;
};
LutUser g_lut_user;

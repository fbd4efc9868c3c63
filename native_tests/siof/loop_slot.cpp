#include "loop.hpp"
static volatile int seed = 7;
Slot::Slot() : v(seed) {}

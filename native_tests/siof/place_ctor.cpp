#include "place.hpp"
static volatile int seed = 11;
Box::Box() : v(seed) {}

#include "probe.hpp"
Box g_mul;

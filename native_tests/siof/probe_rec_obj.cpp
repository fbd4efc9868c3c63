#include "probe.hpp"
Box g_rec;

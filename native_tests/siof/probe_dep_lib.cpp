// A library's own global, built by the library's initializer: the program reading it runs after.
#include "probe.hpp"
Box g_lib_box;

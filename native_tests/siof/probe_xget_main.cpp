// The program's global, reached by its library only through the program's exported getter.
#include "probe.hpp"
Box g_get_box;
Box& get_box() { return g_get_box; }
int main() { return 0; }

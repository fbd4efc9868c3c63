#include "probe.hpp"
Box g_prog_box;
int main() { return 0; }

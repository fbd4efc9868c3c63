#include <cstdio>
#include "probe.hpp"
Box::Box() : v(7), big(7) {}
extern "C" void report(const char* reader, const char* object, long value) {
  std::printf("%s %s %ld\n", reader, object, value);
}

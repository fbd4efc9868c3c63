// One shared object per header version: libholder_v1.so and libholder_v2.so.
#include "holder.hpp"

extern "C" int fixture_version(void) { return HOLDER_VERSION; }
extern "C" int holder_value(void) { return Holder<int>::value; }
extern "C" void *holder_address(void) { return &Holder<int>::value; }
extern "C" int counter_next(void) { return ++counter(); }

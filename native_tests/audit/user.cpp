// pkgc's extension module: it uses tinyreg 1 through its own libcore.so (DT_NEEDED) and instantiates nothing
// itself (extern template), so its .dynsym has Registry<int>::slots and ::name undefined: it binds to whichever
// definition the loader's unique table took first, possibly another package's.
#define TINYREG_VERSION 1
#include "tinyreg.hpp"

extern template struct Registry<int>;

extern "C" int c_version(void) { return Registry<int>::name[8] - '0'; }
extern "C" int* c_slots(void) { return Registry<int>::slots; }

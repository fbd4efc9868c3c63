// One extension module of a package, built against the tinyreg version TINYREG_VERSION: it defines the three
// unique statics. MODULE names its entry points (a_*, b_*, core_*).
#include "tinyreg.hpp"

#define CAT2(a, b) a##_##b
#define CAT(a, b) CAT2(a, b)

extern "C" int CAT(MODULE, touch)(void) { return ++instances(); }
extern "C" int CAT(MODULE, version)(void) { return Registry<int>::name[8] - '0'; }
extern "C" int* CAT(MODULE, slots)(void) { return Registry<int>::slots; }

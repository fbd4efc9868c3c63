// The dependency chain: chain_main -> libchain_mid.so -> libchain_base.so. glibc initializes dependencies
// first (base, mid, main) and finalizes in the reverse order (main, mid, base), at exit and at dlclose.
#include "trace.h"

Traced chain_mid_global("chain_mid.cpp");

// Exported (default visibility) from a shared library: the .init_array slot is relocated against the
// symbol (R_X86_64_64 and friends), not with a RELATIVE relocation.
extern "C" __attribute__((constructor)) void chain_mid_ctor() { trace("init", "chain_mid_ctor"); }
extern "C" __attribute__((destructor)) void chain_mid_fini() { trace("fini", "chain_mid_fini"); }

extern "C" int chain_base_value();
extern "C" int chain_mid_value() { return chain_base_value() + 1; }

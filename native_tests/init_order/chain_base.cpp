// The dependency chain: chain_main -> libchain_mid.so -> libchain_base.so. glibc initializes dependencies
// first (base, mid, main) and finalizes in the reverse order (main, mid, base), at exit and at dlclose.
#include "trace.h"

Traced chain_base_global("chain_base.cpp");

// Exported (default visibility) from a shared library: the .init_array slot is relocated against the
// symbol (R_X86_64_64 and friends), not with a RELATIVE relocation.
extern "C" __attribute__((constructor)) void chain_base_ctor() { trace("init", "chain_base_ctor"); }
extern "C" __attribute__((destructor)) void chain_base_fini() { trace("fini", "chain_base_fini"); }

extern "C" int chain_base_value() { return 1; }

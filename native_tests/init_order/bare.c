/* A freestanding library (no libc, no crt files): only its own .init_array/.fini_array entries. Built for
 * 32-bit big-endian PowerPC, the one ELF flavour no installed sysroot can run; tests read it statically. */
static int counter;

__attribute__((constructor(101))) static void bare_ctor_101(void) { counter += 1; }
__attribute__((constructor)) void bare_ctor(void) { counter *= 2; }
__attribute__((destructor)) static void bare_fini(void) { counter = 0; }

int bare_counter(void) { return counter; }

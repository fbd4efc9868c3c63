/* One translation unit's legacy .ctors and .dtors entries (see legacy_begin.c). */
#include "trace.h"

static void legacy_a_ctor(void) { trace("init", "legacy_a_ctor"); }
static void legacy_a_dtor(void) { trace("fini", "legacy_a_dtor"); }
__attribute__((section(".ctors"), used)) static void (*ctor_entry)(void) = legacy_a_ctor;
__attribute__((section(".dtors"), used)) static void (*dtor_entry)(void) = legacy_a_dtor;

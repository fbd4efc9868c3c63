// Reads another unit's global in one case of a dense switch, which both compilers dispatch through a jump
// table (x86-64: jmp through a table of offsets; AArch64: br through a table of entries): the read goes
// through the pointer argument, known in the case only along the table's edge from the jump. Linked first,
// it reads g_config before construction: the run prints 0 (at exit, so the initializer calls nothing else).
#include <cstdio>
#include "cfg.hpp"
static volatile unsigned which = 5;
volatile int g_sw_sink[12];
#if defined(__clang__)
#define NOT_SPECIALIZED __attribute__((noinline))
#else
#define NOT_SPECIALIZED __attribute__((noipa))  // no clone with the pointer made a constant
#endif
NOT_SPECIALIZED int pick(unsigned k, const Config* c) {
  switch (k) {
    case 0: return g_sw_sink[0] + 1;
    case 1: return g_sw_sink[1] * 3;
    case 2: return g_sw_sink[2] - 7;
    case 3: return g_sw_sink[3] ^ 9;
    case 4: return g_sw_sink[4] + g_sw_sink[6];
    case 5: return c->port;
    case 6: return g_sw_sink[7] * g_sw_sink[8];
    case 7: return g_sw_sink[9] - 11;
    case 8: return g_sw_sink[10] | 4;
    case 9: return g_sw_sink[11] + 13;
    case 10: return g_sw_sink[5] * 17;
    case 11: return g_sw_sink[0] - g_sw_sink[1];
    default: return -1;
  }
}
struct SwitchUser {
  SwitchUser() : saw(pick(which, &g_config)) {}
  int saw;
};
SwitchUser g_switch_user;
__attribute__((destructor)) static void show() { std::printf("sw_user.cpp g_config %d\n", g_switch_user.saw); }

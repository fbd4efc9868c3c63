#include "probe.hpp"
extern Box g_mul;
static unsigned long observe() {
  volatile unsigned long k = 1UL << 63;
  unsigned long x = k;
  unsigned __int128 r = (unsigned __int128)x * g_mul.big;  // GCC -O2: a one-operand mul qword ptr [rip + g_mul+8]
  return (unsigned long)(r >> 63);  // the full product: g_mul.big itself
}
struct MulUser { MulUser() { report(PROBE_UNIT, "g_mul", (long)observe()); } } g_mul_user;

#include "dt_common.hpp"

Tracked::Tracked(int v) : v(v) {}
Tracked::~Tracked() { asm volatile("" ::: "memory"); }
Tracked& local_static() {
  static Tracked s{9};
  return s;
}
thread_local Tracked t_local{5};
int tls_touch() { return t_local.v; }
Tracked g_b{2};
static Tracked s_b{4};
Tracked g_early __attribute__((init_priority(200))){8};
int use_inline = g_inline.v + s_b.v;

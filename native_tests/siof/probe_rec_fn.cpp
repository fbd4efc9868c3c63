// Mutual recursion: f's summary, computed while g is on the walk's stack, lacks g's read of g_rec.
#include "probe.hpp"
extern Box g_rec;
long g_walk(int n);
__attribute__((noinline)) long f_walk(int n) { return n > 0 ? g_walk(n - 1) : -1; }
__attribute__((noinline)) long g_walk(int n) { return n > 0 ? f_walk(n - 1) : g_rec.v; }
__attribute__((noinline)) long k_walk() { return f_walk(1); }

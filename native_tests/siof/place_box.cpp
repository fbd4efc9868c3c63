// A global built with placement new in a function the unit's initializer calls (NoDestructor-style: never
// destroyed). The storage has no initializer of its own, so ASan does not watch it; on x86-64 the function is
// one the analysis first only skims, and decoding it shows the constructor call on g_box_storage.
#include <new>
#include "place.hpp"
alignas(Box) unsigned char g_box_storage[sizeof(Box)];
__attribute__((noinline)) static bool make_box() {
  new (g_box_storage) Box();
  return true;
}
static bool g_box_made = make_box();
const Box& the_box() { return *reinterpret_cast<const Box*>(g_box_storage); }
bool box_made() { return g_box_made; }

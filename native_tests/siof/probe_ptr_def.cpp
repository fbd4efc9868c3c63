#include "probe.hpp"
#include "probe_ptr.hpp"
Box g_ptrd, g_fnd, g_vird;
Box* g_pbox = &g_ptrd;  // writable, relocated at load: nothing stores into it
static long read_fnd() { return g_fnd.v; }
long (*g_fnp)() = read_fnd;
namespace {
struct VirdReader : Reader {
  long get() const override { return g_vird.v; }
};
VirdReader g_vird_reader;  // constant-initialized: its vptr is a relocated word of writable data
}  // namespace
Reader& g_reader = g_vird_reader;

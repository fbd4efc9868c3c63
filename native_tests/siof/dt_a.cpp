#include "dt_common.hpp"

std::string g_name = "a string long enough to need the heap, destroyed by libstdc++";  // dtor defined elsewhere
Tracked g_a{1};
Tracked g_arr[3] = {{1}, {2}, {3}};  // arrays register a helper (__tcf_N / __cxx_global_array_dtor), no object
static int touch = Holder<int>::value.v + local_static().v + g_inline.v;
static int touch_tls = tls_touch();
int a_sum() { return touch + touch_tls + g_a.v; }

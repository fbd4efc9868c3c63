// libcxxhelper.so: an ordinary C++ library (DT_NEEDED libstdc++.so.6). It brings the system libstdc++ into
// the static plugin's dlopen, where the plugin comes first in libstdc++'s scope.
#include <sstream>
#include <string>
extern "C" int helper_len(const char *s) {
    std::ostringstream out;
    out << s;
    return static_cast<int>(out.str().size());
}

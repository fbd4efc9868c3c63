// The lightgbm case: a plugin linked with -static-libstdc++ whose copy of libstdc++'s symbols (std::ctype and
// the other locale facets, typeinfo, vtables) is exported with default visibility. The system libstdc++,
// loaded in the same dlopen through libcxxhelper.so, binds its own references to these copies (relocation
// dependencies) and is NODELETE by unique symbols of its own: the plugin can never unload, patched or not.
#include <locale>
#include <sstream>
extern "C" int helper_len(const char *s);
extern "C" int plugin_upper(int c) {
    std::locale loc;
    std::ostringstream out;
    out << c;
    return std::use_facet<std::ctype<char> >(loc).toupper(static_cast<char>(c)) + 0 * helper_len(out.str().c_str());
}

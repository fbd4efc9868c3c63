#include "probe_tmpl.hpp"
struct TmplUser { TmplUser() { report(PROBE_UNIT, "_ZN6HolderIiE1bE", Holder<int>::b.v); } } g_tmpl_user;

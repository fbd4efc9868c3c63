#include "probe_tmpl.hpp"
template struct Holder<int>;

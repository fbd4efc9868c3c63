#include "probe.hpp"
#include "probe_tlsin.hpp"
Box g_tlsin;  // built last: read first through t_inl's initialization

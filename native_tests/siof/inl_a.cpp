#include "inl.hpp"
struct InlA {
  InlA() : saw(g_inline_cfg.port + Tmpl<int>::value.port) {}
  int saw;
};
InlA g_inl_a;

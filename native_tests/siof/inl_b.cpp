#include "inl.hpp"
struct InlB {
  InlB() : saw(g_inline_cfg.port + Tmpl<int>::value.port) {}
  int saw;
};
InlB g_inl_b;

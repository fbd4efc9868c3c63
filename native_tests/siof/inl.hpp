#pragma once
#include "cfg.hpp"
inline Config g_inline_cfg;  // C++17 inline variable: guarded, built by whichever unit runs first
template <class T> struct Tmpl { static Config value; };
template <class T> Config Tmpl<T>::value;  // a template's static member: guarded too

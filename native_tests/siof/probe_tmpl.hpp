#pragma once
#include "probe.hpp"
template <class T> struct Holder { static Box b; };
template <class T> Box Holder<T>::b;
extern template struct Holder<int>;

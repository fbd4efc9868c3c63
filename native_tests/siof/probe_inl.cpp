#include "probe.hpp"
// A reader defined before its object in one file, the object built by an inlined constructor (plain stores,
// no constructor call): the unit's initializer loads g_inl, then stores into it. A flag checked before a
// build has the same shape, so the analysis cannot call it a finding: the entry must say it is incomplete.
static volatile long seed = 7;
struct Inl {
  long v;
  Inl() : v(seed) {}
};
extern Inl g_inl;
struct InlReader {
  InlReader() { report(PROBE_UNIT, "g_inl", g_inl.v); }
} g_inl_reader;
Inl g_inl;

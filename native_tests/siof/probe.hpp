// The probe fixtures (issue classes the order analysis used to miss): each initializer reports what it
// observed through report(), so the run itself is the truth: a value of 0 is a read before construction.
#pragma once
struct Box {
  Box();  // probe_box.cpp: out of line, so every Box is built by an initializer (never at compile time)
  int v;
  unsigned long big;
};
extern "C" void report(const char* reader, const char* object, long value);
#ifndef PROBE_UNIT  // siof.mk passes the source's file name (older compilers have no __FILE_NAME__)
#define PROBE_UNIT __FILE_NAME__
#endif

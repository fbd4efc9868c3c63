// The placement and shared_init fixtures' types: built by code an initializer calls, not by an initializer of
// their own.
#pragma once
struct Box {
  Box();  // place_ctor.cpp: out of line, so the caller's code shows a constructor call on the storage
  int v;
};
extern unsigned char g_box_storage[];  // place_box.cpp: a Box built in place (NoDestructor-style)
const Box& the_box();

constexpr int kDefaults = 32;
extern int g_defaults[kDefaults];  // shared_defaults.cpp: filled on first use by init_defaults()
void init_defaults();

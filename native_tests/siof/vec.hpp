// The vector fixture's global: 32 bytes a vector load reads at once, built at run time (the volatile keeps
// clang from evaluating the constructor at compile time).
#pragma once
struct Table {
  Table();
  int v[8];
};
extern Table g_table;  // vec_table.cpp
int table_sum();       // vec_helper.cpp

// A zero-initialized array that an initializer fills in a loop of stores through a moving pointer (GCC -O2
// vectorizes it). ASan does not watch g_squares (it has no dynamic initializer of its own, g_filler has).
#include "loop.hpp"
int g_squares[kSquares];
static volatile int scale = 1;  // keeps the fill from being evaluated at compile time
namespace {
struct Filler {
  Filler() {
    int k = scale;
    for (int i = 0; i < kSquares; ++i) g_squares[i] = k * i * i;
  }
} g_filler;
}  // namespace

// The loop fixtures' globals: each is built by a loop in its unit's initializer, so the code reaches it only
// through a register that moves (an induction pointer), never at one fixed address.
#pragma once
struct Slot {
  Slot();  // loop_slot.cpp: out of line, so the initializer calls it once per element, `this` in a register
  int v;
};
constexpr int kSlots = 512;
constexpr int kSquares = 256;
constexpr int kLut = 64;
extern Slot g_slots[kSlots];      // loop_slots.cpp
extern int g_squares[kSquares];  // loop_squares.cpp
extern int g_lut[kLut];          // loop_lut.cpp

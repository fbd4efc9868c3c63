// Reads an element of another unit's array of objects, built in a loop: before-construction when linked first.
#include "loop.hpp"
struct SlotUser {
  SlotUser() : saw(g_slots[3].v) {}
  int saw;
};
SlotUser g_slot_user;

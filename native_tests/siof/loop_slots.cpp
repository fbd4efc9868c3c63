// An array of objects with a constructor: the initializer loops over the elements, calling Slot::Slot() with
// `this` advancing through g_slots.
#include "loop.hpp"
Slot g_slots[kSlots];

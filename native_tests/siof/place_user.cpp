// Reads the box another unit builds in place, linked first: before-construction.
#include "place.hpp"
struct BoxUser {
  BoxUser() : saw(reinterpret_cast<const Box*>(g_box_storage)->v) {}
  int saw;
};
BoxUser g_box_user;

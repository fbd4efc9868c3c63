// Reads another unit's array, filled by a loop of stores, linked first: it still holds zeros.
#include "loop.hpp"
struct SquareUser {
  SquareUser() : saw(g_squares[5]) {}
  int saw;
};
SquareUser g_square_user;

/* Loads liblegacy.so at start-up (DT_NEEDED) and prints the trace. */
#include "trace.h"

int legacy_value(void);

int main(void) {
  trace("mark", "main");
  dump_slots();
  return legacy_value() == 42 ? 0 : 1;
}

// main() of the siof_* and cofu_* programs: report what the user saw, then the run-time array slots.
#include <stdio.h>

#include "config.hpp"
#include "trace.h"

void trace_value(const char *key, long value) {
  char buf[128];
  snprintf(buf, sizeof buf, "%s=%ld", key, value);
  trace("value", buf);
}

int main() {
  trace("mark", "main");
  trace_value("main-saw-port", user_saw_port());
  dump_slots();
  return 0;
}

/* libbundled.so: a library a wheel ships beside its extension (shapely's libgeos in shapely.libs/), with one
   STB_GNU_UNIQUE object, as a C++ inline function's static would be: once loaded, glibc never unloads it. */
int bundled_state = 7;
__asm__(".type bundled_state, @gnu_unique_object");

int bundled_value(void) { return bundled_state; }

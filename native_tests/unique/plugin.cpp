// A plugin whose host calls plugin_load_count() once after every dlopen. The count lives in a static local of
// an inline function (unique), so while glibc refuses to unload the plugin the count keeps growing across
// dlclose/dlopen cycles; once the plugin really unloads, every load starts again from 1.
inline int &load_count() {
    static int n = 0;
    return n;
}

extern "C" int plugin_load_count(void) { return ++load_count(); }

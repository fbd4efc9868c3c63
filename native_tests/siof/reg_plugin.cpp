#include <map>
#include <string>
extern std::map<std::string, int> g_registry;
static bool registered = (g_registry["plugin"] = 1, true);
bool plugin_registered() { return registered; }

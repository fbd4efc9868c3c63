#include <map>
#include <string>
std::map<std::string, int> g_registry;  // a plain global map that other units register into

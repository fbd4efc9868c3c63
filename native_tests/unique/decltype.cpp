#include <map>
#include <string>
#include <vector>
// A function-local static in a function template whose return type is decltype(...): its mangled name holds
// an expression (DT...E), which the demangler's length bound must read.
template <class K, class V> auto counter(const std::map<K, V>& m, const K& k) -> decltype(m.count(k) + m.size()) {
    static decltype(m.size()) calls;
    return ++calls + m.count(k);
}
template auto counter(const std::map<std::string, std::vector<std::string>>&, const std::string&)
    -> decltype(std::map<std::string, std::vector<std::string>>().size());

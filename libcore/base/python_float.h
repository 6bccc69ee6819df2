// Python's repr(float), for text that must read as upstream's Python wrote it.
#pragma once
#include <string>

namespace mds::base {

// The shortest round-trip digits, fixed notation for exponents -4 to 15 ("0.0001",
// "1.3333333333333333", "2.0"), scientific otherwise ("1e-05", "1.5e+16"); "nan", "inf".
std::string python_float_repr(double value);

}  // namespace mds::base

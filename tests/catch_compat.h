// The tests' one include of Catch2, version 2 (Debian 12's `catch2`) or 3
// (Debian 13's). Version 3 moved what the tests use: Approx into namespace
// Catch, and the string matchers into Catch::Matchers, where Contains became
// ContainsSubstring; the names below give the tests one spelling for both.
#pragma once

// BATON_CATCH2_MAJOR is the version CMake found and links (tests/CMakeLists.txt):
// a machine can hold Catch2 3's headers on its include path beside a Catch2 2
// given on the prefix path, and the headers must match the library.
#if defined(BATON_CATCH2_MAJOR) ? BATON_CATCH2_MAJOR >= 3 : __has_include(<catch2/catch_all.hpp>)
#include <catch2/catch_all.hpp>

#include <string>

using Catch::Approx;

namespace Catch {
inline Matchers::StringContainsMatcher Contains(const std::string& text) { return Matchers::ContainsSubstring(text); }
using Matchers::StartsWith;
}  // namespace Catch
#else
#include <catch2/catch.hpp>
#endif

# The fuzz targets built without libFuzzer, with any compiler, each linked
# with fuzz/seed_replay.cc, and a test per target that runs it on its seed
# corpus fuzz/corpus/<target>/ (the crash regressions the fuzzers found are
# seeds there too): a target that stops compiling fails the build, a seed that
# breaks a property fails the suite. Fuzzing itself is tools/fuzz (clang).
include(${PROJECT_SOURCE_DIR}/fuzz/targets.cmake)
foreach(target ${baton_fuzz_targets})
  add_executable(${target}_seeds ${PROJECT_SOURCE_DIR}/fuzz/${target}.cc ${PROJECT_SOURCE_DIR}/fuzz/seed_replay.cc)
  target_link_libraries(${target}_seeds PRIVATE baton::sim baton::options)
  set(name "fuzz seeds: ${target}'s seed corpus keeps every property")
  add_test(NAME "${name}" COMMAND ${target}_seeds ${PROJECT_SOURCE_DIR}/fuzz/corpus/${target})
  set_tests_properties("${name}" PROPERTIES TIMEOUT 120 LABELS fuzz)
endforeach()

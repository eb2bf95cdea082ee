# The fuzz targets, one fuzz/<name>.cc each with its seeds in
# fuzz/corpus/<name>/: built with libFuzzer by fuzz/CMakeLists.txt
# (BATON_FUZZ, tools/fuzz) and without it by fuzz/seeds.cmake.
set(baton_fuzz_targets fuzz_profile fuzz_topology fuzz_plan fuzz_stages fuzz_action fuzz_trace fuzz_kernels fuzz_megatron)

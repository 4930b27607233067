include(GoogleTest)
# mcserve_gtest(name SOURCES... LIBS... [LABELS...]): one GoogleTest binary registered with CTest.
function(mcserve_gtest name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    MCSERVE_SOURCE_DIR="${PROJECT_SOURCE_DIR}" MCSERVE_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/data")
  mcserve_warnings(${name})
  # Outputs made for overwrite (Tensor::ForOverwrite) are filled with NaN in every test: an op that
  # reads one before writing it fails its test.
  # LABELS last: an empty label list would swallow the next property's name.
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300
                       ENVIRONMENT "MCSERVE_POISON_FOR_OVERWRITE=1" LABELS "${ARG_LABELS}")
endfunction()

# The gpu twins of the CUDA parity tests. MCSERVE_COMPUTE_SANITIZER (option; the environment
# variable of that name, when set at configure time, overrides it): run them under compute-sanitizer's
# memcheck when it is found (next to nvcc or on PATH).
option(MCSERVE_COMPUTE_SANITIZER "Run the gpu-labelled tests under compute-sanitizer --tool memcheck" OFF)
if(DEFINED ENV{MCSERVE_COMPUTE_SANITIZER})
  set(MCSERVE_COMPUTE_SANITIZER "$ENV{MCSERVE_COMPUTE_SANITIZER}" CACHE BOOL
      "Run the gpu-labelled tests under compute-sanitizer --tool memcheck" FORCE)
endif()
set(MCSERVE_GPU_TEST_LAUNCHER)
if(MCSERVE_COMPUTE_SANITIZER)
  find_program(MCSERVE_COMPUTE_SANITIZER_EXE compute-sanitizer
               HINTS ${CUDAToolkit_BIN_DIR} /usr/local/cuda/bin)
  if(MCSERVE_COMPUTE_SANITIZER_EXE)
    set(MCSERVE_GPU_TEST_LAUNCHER ${MCSERVE_COMPUTE_SANITIZER_EXE} --tool memcheck --error-exitcode 1)
    message(STATUS "mcserve: gpu tests run under ${MCSERVE_COMPUTE_SANITIZER_EXE} (memcheck)")
  else()
    message(WARNING "MCSERVE_COMPUTE_SANITIZER=ON but compute-sanitizer was not found: gpu tests run without it")
  endif()
endif()

# mcserve_gpu_test(name): registers the test binary `name` (from mcserve_gtest) a second time, whole,
# as `<name>_gpu` with label gpu and MCSERVE_TEST_DEVICE=cuda, so its CUDA parity tests run on a real
# GPU (tests/unit/kernels/emu_test_device.h). Without a usable GPU every test skips itself and CTest
# reports `<name>_gpu` as skipped (not passed, not failed).
function(mcserve_gpu_test name)
  add_test(NAME ${name}_gpu COMMAND ${MCSERVE_GPU_TEST_LAUNCHER} $<TARGET_FILE:${name}>)
  set_tests_properties(${name}_gpu PROPERTIES
    LABELS gpu
    ENVIRONMENT MCSERVE_TEST_DEVICE=cuda
    # Printed only by the skip of the whole binary (no usable GPU); a test that skips itself on a
    # GPU must not hide the failures of the others.
    SKIP_REGULAR_EXPRESSION "mcserve: no usable GPU, every test skipped"
    TIMEOUT 3600)
endfunction()

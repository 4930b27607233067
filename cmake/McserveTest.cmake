include(GoogleTest)
# mcserve_gtest(name SOURCES... LIBS... [LABELS...]): one GoogleTest binary registered with CTest.
function(mcserve_gtest name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    MCSERVE_SOURCE_DIR="${PROJECT_SOURCE_DIR}" MCSERVE_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/data")
  mcserve_warnings(${name})
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300 LABELS "${ARG_LABELS}")
endfunction()

# Sources of a layer: every .cc in the folder except tests (*_test.cc) and fuzz targets.
function(collx_add_layer_sources target dir)
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${dir}/*.cc)
  list(FILTER sources EXCLUDE REGEX "_(test|fuzz)\\.cc$")
  target_sources(${target} PRIVATE ${sources})
endfunction()

# collx_add_test(NAME name SOURCES a.cc b.cc [TIMEOUT seconds] [LABELS l...] [SERIAL]
#                [LIBS ...]): a GoogleTest executable run by ctest as one test.
function(collx_add_test)
  cmake_parse_arguments(T "SERIAL" "NAME;TIMEOUT" "SOURCES;LABELS;LIBS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE collx_internal collx_test_support GTest::gtest GTest::gtest_main ${T_LIBS})
  add_test(NAME ${T_NAME} COMMAND ${T_NAME})
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT})
  if(T_LABELS)
    set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}")
  endif()
  if(T_SERIAL)
    set_tests_properties(${T_NAME} PROPERTIES RUN_SERIAL TRUE)
  endif()
endfunction()

# Every *_test.cc in a source folder becomes its own test executable (tests live beside
# their subject).
function(collx_add_folder_tests dir)
  file(GLOB tests CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${dir}/*_test.cc)
  foreach(test ${tests})
    get_filename_component(name ${test} NAME_WE)
    collx_add_test(NAME ${name} SOURCES ${test} TIMEOUT 300 LABELS unit)
  endforeach()
endfunction()

# A layer: an object library of every .cc in the folder except tests (*_test.cc) and fuzz
# targets (*_fuzz.cc). An empty folder gets a placeholder so the target always exists.
function(collx_add_layer target dir)
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${dir}/*.cc)
  list(FILTER sources EXCLUDE REGEX "_(test|fuzz)\\.cc$")
  if(NOT sources)
    set(placeholder ${CMAKE_BINARY_DIR}/empty_${target}.cc)
    file(WRITE ${placeholder} "// ${dir} has no sources yet\n")
    set(sources ${placeholder})
  endif()
  add_library(${target} OBJECT ${sources})
  target_link_libraries(${target} PUBLIC collx_headers)
endfunction()

# collx_add_test(NAME name SOURCES a.cc b.cc [TIMEOUT seconds] [LABELS l...] [SERIAL]
#                [LIBS ...]): a GoogleTest executable run by ctest as one test.
function(collx_add_test)
  cmake_parse_arguments(T "SERIAL" "NAME;TIMEOUT" "SOURCES;LABELS;LIBS" ${ARGN})
  if(NOT T_LIBS)
    set(T_LIBS collx_internal)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  if(COLLX_SANITIZE)
    # Sanitized code runs 2-3x (ASan, UBSan) to 5-15x (TSan) slower: scale the limits so that
    # only a hang, not the instrumentation, times a test out.
    math(EXPR T_TIMEOUT "${T_TIMEOUT} * 4")
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} collx_headers GTest::gtest GTest::gtest_main)
  target_compile_definitions(${T_NAME} PRIVATE COLLX_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  # A long executable runs as several ctest tests, each a GoogleTest shard (GTEST_TOTAL_SHARDS,
  # GTEST_SHARD_INDEX): ctest -j keeps both cores busy to the end instead of waiting on one
  # long test, and each shard stays far from its limit on a loaded machine.
  set(shards 1)
  foreach(entry ${COLLX_TEST_SHARDS})
    if(entry MATCHES "^${T_NAME}=([0-9]+)$")
      set(shards ${CMAKE_MATCH_1})
    endif()
  endforeach()
  set(names ${T_NAME})
  if(shards GREATER 1)
    set(names "")
    math(EXPR last "${shards} - 1")
    foreach(index RANGE ${last})
      set(name ${T_NAME}_shard${index})
      add_test(NAME ${name} COMMAND ${T_NAME})
      # COST: ctest -j starts the long ones first (a clean clone has no timing data yet).
      set_tests_properties(${name} PROPERTIES ENVIRONMENT "GTEST_TOTAL_SHARDS=${shards};GTEST_SHARD_INDEX=${index}"
                                              COST 100)
      list(APPEND names ${name})
    endforeach()
  else()
    add_test(NAME ${T_NAME} COMMAND ${T_NAME})
  endif()
  set_tests_properties(${names} PROPERTIES TIMEOUT ${T_TIMEOUT})
  if(T_LABELS)
    set_tests_properties(${names} PROPERTIES LABELS "${T_LABELS}")
  endif()
  if(T_SERIAL)
    set_tests_properties(${names} PROPERTIES RUN_SERIAL TRUE)
  endif()
endfunction()

# Every *_test.cc in a source folder becomes its own test executable (tests live beside
# their subject), linked with the layers named after LIBS (object libraries are not
# transitive, so name every layer needed).
function(collx_add_folder_tests dir)
  cmake_parse_arguments(F "" "" "LIBS" ${ARGN})
  file(GLOB tests CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${dir}/*_test.cc)
  foreach(test ${tests})
    get_filename_component(name ${test} NAME_WE)
    collx_add_test(NAME ${name} SOURCES ${test} TIMEOUT 300 LABELS unit LIBS ${F_LIBS})
  endforeach()
endfunction()

# cmake -DNM=nm -DLIBRARY=libcollx.so -DHEADER_DIR=include/collx -P exported_symbols.cmake
#
# The ABI is exactly the collx_* C functions: anything else exported (a C++ symbol, a
# helper a version script forgot) becomes something users can link to and we can never
# remove. Conversely every COLLX_API declaration must really be exported, or programs
# compile against the header and fail at link/load time.
cmake_minimum_required(VERSION 3.20)  # IN_LIST and friends in script mode

foreach(var NM LIBRARY HEADER_DIR)
  if(NOT ${var})
    message(FATAL_ERROR "usage: cmake -DNM=... -DLIBRARY=... -DHEADER_DIR=... -P ${CMAKE_SCRIPT_MODE_FILE}")
  endif()
endforeach()

execute_process(COMMAND ${NM} -D --defined-only ${LIBRARY}
  OUTPUT_VARIABLE nm_out RESULT_VARIABLE nm_rc ERROR_VARIABLE nm_err)
if(NOT nm_rc EQUAL 0)
  message(FATAL_ERROR "${NM} failed on ${LIBRARY}: ${nm_err}")
endif()

set(exported "")
set(bad "")
string(REPLACE "\n" ";" lines "${nm_out}")
foreach(line IN LISTS lines)
  # "<address> <type> <name>[@[@]VERSION]"
  if(NOT line MATCHES "^[0-9a-fA-F]* *([A-Za-z]) ([^@ ]+)")
    continue()
  endif()
  set(type ${CMAKE_MATCH_1})
  set(name ${CMAKE_MATCH_2})
  # Absolute symbols are version node names (COLLX_0), not code or data.
  if(type STREQUAL "A")
    continue()
  endif()
  if(name MATCHES "^collx_")
    list(APPEND exported ${name})
  else()
    list(APPEND bad "${type} ${name}")
  endif()
endforeach()

# Every public function is declared on one line as `COLLX_API <type> collx_name(`, in one of
# the public headers (collx.h, parallel*.h, topology.h, ...).
file(GLOB headers ${HEADER_DIR}/*.h)
set(HEADER "${HEADER_DIR}/*.h")
set(api_lines "")
foreach(header IN LISTS headers)
  file(STRINGS ${header} lines_of_header REGEX "^COLLX_API ")
  list(APPEND api_lines ${lines_of_header})
endforeach()
set(declared "")
foreach(line IN LISTS api_lines)
  if(line MATCHES "[ *](collx_[a-z0-9_]+)\\(")
    list(APPEND declared ${CMAKE_MATCH_1})
  endif()
endforeach()
list(LENGTH declared n_declared)
if(n_declared LESS 10)
  message(FATAL_ERROR "found only ${n_declared} COLLX_API functions in ${HEADER}: the header "
                      "layout changed and this check no longer sees the API")
endif()

set(missing "")
foreach(fn IN LISTS declared)
  if(NOT fn IN_LIST exported)
    list(APPEND missing ${fn})
  endif()
endforeach()

list(LENGTH exported n_exported)
message(STATUS "${LIBRARY}: ${n_exported} exported collx_* symbols, ${n_declared} declared in the header")
set(failed FALSE)
if(bad)
  list(JOIN bad "\n  " text)
  message(SEND_ERROR "exported symbols outside collx_* (fix visibility or lib/api/libcollx.map):\n  ${text}")
  set(failed TRUE)
endif()
if(missing)
  list(JOIN missing "\n  " text)
  message(SEND_ERROR "COLLX_API functions declared in the public headers but not exported:\n  ${text}")
  set(failed TRUE)
endif()
# Not fatal: an exported collx_* name missing from the header is odd, but may be a
# deliberately undocumented entry point; print it so a reviewer sees it.
foreach(sym IN LISTS exported)
  if(NOT sym IN_LIST declared)
    message(STATUS "note: ${sym} is exported but not declared in any public header")
  endif()
endforeach()
if(failed)
  message(FATAL_ERROR "ABI check failed")
endif()

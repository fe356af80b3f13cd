# Install rules and the exported CMake / pkg-config packages (docs/packaging.md).
#
#   include/collx/*.h            public headers, plus the generated collx_version.h
#   <libdir>/libcollx.so*        shared library (SOVERSION = major: same major, same ABI)
#   <libdir>/libcollx.a          static library built from the same layer objects
#   bin/collx-info, collx-bench  tools
#   <libdir>/cmake/collx/        find_package(collx): collx::collx, collx::collx_static
#   <libdir>/pkgconfig/collx.pc  pkg-config --cflags --libs collx
#
# Only collx and collx_static enter the export set: the layer object libraries and
# collx_headers are build-tree details and must never appear in collx-targets.cmake.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The static library reuses the layer objects (already -fPIC, hidden visibility) rather than
# recompiling. It links no object library, so nothing internal leaks into its interface;
# Threads is public because a static archive cannot carry its own dependencies.
add_library(collx_static STATIC ${COLLX_LAYER_OBJECTS})
set_target_properties(collx_static PROPERTIES OUTPUT_NAME collx EXPORT_NAME collx_static)
target_link_libraries(collx_static PUBLIC Threads::Threads)
# The optional libraries the layers use must follow the archive to its consumers. Inside the
# build they are the imported targets; installed, plain library names the linker finds in
# the system directories (pkg-config's targets are not exportable). collx.pc lists the same
# names in Libs.private.
set(COLLX_STATIC_DEPS "")
if(COLLX_HAVE_UCX)
  target_link_libraries(collx_static PUBLIC $<BUILD_INTERFACE:PkgConfig::UCX>)
  list(APPEND COLLX_STATIC_DEPS ${UCX_LIBRARIES})
endif()
if(COLLX_HAVE_HWLOC)
  target_link_libraries(collx_static PUBLIC $<BUILD_INTERFACE:PkgConfig::HWLOC>)
  list(APPEND COLLX_STATIC_DEPS ${HWLOC_LIBRARIES})
endif()
if(COLLX_HAVE_OPENSSL)
  target_link_libraries(collx_static PUBLIC $<BUILD_INTERFACE:OpenSSL::Crypto>)
  list(APPEND COLLX_STATIC_DEPS crypto)
endif()
list(APPEND COLLX_STATIC_DEPS ${CMAKE_DL_LIBS})
foreach(lib ${COLLX_STATIC_DEPS})
  target_link_libraries(collx_static PUBLIC $<INSTALL_INTERFACE:${lib}>)
endforeach()
list(TRANSFORM COLLX_STATIC_DEPS PREPEND "-l" OUTPUT_VARIABLE _collx_pc_libs)
string(JOIN " " COLLX_PC_PRIVATE_LIBS ${_collx_pc_libs})
target_include_directories(collx_static PUBLIC
  $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
  $<BUILD_INTERFACE:${CMAKE_CURRENT_BINARY_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
# C consumers of the archive still need libstdc++ at link time; exported as
# IMPORTED_LINK_INTERFACE_LANGUAGES so CMake links it with the C++ driver.
set_target_properties(collx_static PROPERTIES LINKER_LANGUAGE CXX)

set(COLLX_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/collx)

install(TARGETS collx collx_static EXPORT collx-targets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(DIRECTORY include/collx DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev
  FILES_MATCHING PATTERN "*.h")
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/include/collx/collx_version.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/collx COMPONENT dev)

# Tools. collx-bench loads libcollx.so, so it looks beside itself first ($ORIGIN) and the
# installed tree works without LD_LIBRARY_PATH.
file(RELATIVE_PATH _collx_bin_to_lib
  ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR})
foreach(tool collx-info collx-bench)
  if(TARGET ${tool})
    set_target_properties(${tool} PROPERTIES INSTALL_RPATH "$ORIGIN/${_collx_bin_to_lib}")
    install(TARGETS ${tool} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
  endif()
endforeach()

# CMake package. install(EXPORT) writes a relocatable targets file (paths relative to the
# file itself), so the tree may be installed under any --prefix.
install(EXPORT collx-targets NAMESPACE collx:: FILE collx-targets.cmake
  DESTINATION ${COLLX_CMAKE_INSTALL_DIR} COMPONENT dev)
configure_package_config_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/collx-config.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/collx-config.cmake
  INSTALL_DESTINATION ${COLLX_CMAKE_INSTALL_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/collx-config-version.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/collx-config.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/collx-config-version.cmake
  DESTINATION ${COLLX_CMAKE_INSTALL_DIR} COMPONENT dev)

# pkg-config. prefix is derived from ${pcfiledir} so `cmake --install --prefix X` works
# without reconfiguring (the configure-time prefix is usually /usr/local).
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(COLLX_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _collx_pc_up
    ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
  string(REGEX REPLACE "/$" "" _collx_pc_up "${_collx_pc_up}")
  set(COLLX_PC_PREFIX "\${pcfiledir}/${_collx_pc_up}")
endif()
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(COLLX_PC_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(COLLX_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/collx.pc.in
  ${CMAKE_CURRENT_BINARY_DIR}/collx.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/collx.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

# Hardening flags for optimised builds (docs/security.md, "Hardened builds"):
#   -D_FORTIFY_SOURCE=2         bounds-checked memcpy/snprintf/read... where sizes are known
#                               (needs optimisation, so not in Debug)
#   -fstack-protector-strong    a canary in every function with an array or address-taken local
#   -fstack-clash-protection    stack probes, so a large alloca cannot jump the guard page
#   -Wl,-z,relro,-z,now         full RELRO: the GOT is resolved at load and made read-only
# Off under sanitizers and in fuzz builds: ASan intercepts the same functions FORTIFY wraps
# (and reports overflows itself), and those builds are for finding bugs, not for shipping.
# tests/packaging/hardening_flags_test.sh checks that libcollx.so carries them.
option(COLLX_HARDENING "Hardening flags (FORTIFY_SOURCE, stack protector, full RELRO) in builds without sanitizers" ON)
set(COLLX_HARDENED OFF)
if(COLLX_HARDENING AND NOT COLLX_SANITIZE AND NOT COLLX_FUZZ)
  set(COLLX_HARDENED ON)
  include(CheckCXXCompilerFlag)
  set(collx_hardening_flags -fstack-protector-strong)
  check_cxx_compiler_flag(-fstack-clash-protection COLLX_HAVE_STACK_CLASH_PROTECTION)
  if(COLLX_HAVE_STACK_CLASH_PROTECTION)
    list(APPEND collx_hardening_flags -fstack-clash-protection)
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${collx_hardening_flags}>")
  # -U first: some toolchains predefine another level, and a redefinition is an error.
  add_compile_options("$<$<AND:$<COMPILE_LANGUAGE:C,CXX>,$<NOT:$<CONFIG:Debug>>>:-U_FORTIFY_SOURCE;-D_FORTIFY_SOURCE=2>")
  add_link_options("LINKER:-z,relro,-z,now")
endif()

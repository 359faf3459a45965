# Compat tests: unmodified consumers of libibverbs.so.1 against ours.

# Helpers built the way any Debian program is: against Debian's
# libibverbs.so (so they bind to rdma-core's versioned symbols) and without
# an RPATH, so LD_LIBRARY_PATH decides which libibverbs.so.1 they run on.
# The library is named by full path: "ibverbs" is our own target.
find_library(SV_SYSTEM_IBVERBS NAMES libibverbs.so
             PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE} /usr/lib64 /usr/lib
             NO_DEFAULT_PATH)
if(SV_SYSTEM_IBVERBS)
  foreach(t abi_dump abi_load)
    add_executable(${t} ${CMAKE_CURRENT_LIST_DIR}/${t}.c)
    target_link_libraries(${t} PRIVATE ${SV_SYSTEM_IBVERBS} ${CMAKE_DL_LIBS})
    set_target_properties(${t} PROPERTIES SKIP_BUILD_RPATH ON)
  endforeach()
  sv_script_test(abi_symbols compat/abi_symbols.sh)
else()
  message(WARNING "Debian's libibverbs.so not found: abi_symbols test disabled")
endif()

# pyverbs PD/MR (reg, rereg, import, ODP) on our library (seed verbs).
if(EXISTS /usr/bin/python3)
  add_test(NAME pyverbs_seed COMMAND /usr/bin/python3
           ${CMAKE_CURRENT_LIST_DIR}/pyverbs_seed_test.py)
  set_tests_properties(pyverbs_seed PROPERTIES ENVIRONMENT "${SV_TEST_ENV}"
                       TIMEOUT 120 LABELS compat)
endif()

# Unit tests: one module each, linked with its source directly.
set(U ${CMAKE_CURRENT_LIST_DIR})
add_executable(test_ida ${U}/test_ida.c ${CMAKE_SOURCE_DIR}/src/daemon/ida.c)
target_include_directories(test_ida PRIVATE ${CMAKE_SOURCE_DIR}/src/daemon)
add_test(NAME test_ida COMMAND test_ida)
set_tests_properties(test_ida PROPERTIES TIMEOUT 120 LABELS unit)

# The fault plans' grammar (src/common/sv_fault.c, docs/faults.md).
add_executable(test_fault ${U}/test_fault.c)
target_link_libraries(test_fault PRIVATE sv_common)
add_test(NAME test_fault COMMAND test_fault)
set_tests_properties(test_fault PROPERTIES TIMEOUT 60 LABELS unit)

# RoCE v2 encapsulation and ICRC (src/common/sv_roce.c).
add_executable(test_roce ${U}/test_roce.c)
target_link_libraries(test_roce PRIVATE sv_common)
add_test(NAME test_roce COMMAND test_roce)
set_tests_properties(test_roce PROPERTIES TIMEOUT 60 LABELS unit)

# The packet codec (src/common/sv_hdr.h, sv_roce.c) against hand-written
# IBTA/IP/UDP bytes and an independently computed frame; the work-request
# opcode table against the transport opcode table (src/engine/sv_opcode.c).
add_executable(test_hdr ${U}/test_hdr.c ${CMAKE_SOURCE_DIR}/src/engine/sv_opcode.c)
target_include_directories(test_hdr PRIVATE ${CMAKE_SOURCE_DIR}/src/engine)
target_link_libraries(test_hdr PRIVATE sv_common)
add_test(NAME test_hdr COMMAND test_hdr)
set_tests_properties(test_hdr PROPERTIES TIMEOUT 60 LABELS unit)

add_executable(test_port_tab ${U}/test_port_tab.c
  ${CMAKE_SOURCE_DIR}/src/daemon/port_tab.c)
target_include_directories(test_port_tab PRIVATE ${CMAKE_SOURCE_DIR}/src/daemon
  ${CMAKE_SOURCE_DIR}/src/common)
add_test(NAME test_port_tab COMMAND test_port_tab)
set_tests_properties(test_port_tab PROPERTIES TIMEOUT 60 LABELS unit)

# Where another process is, from /proc (src/common/sv_proc.c).
add_executable(test_proc ${U}/test_proc.c)
target_link_libraries(test_proc PRIVATE sv_common)
add_test(NAME test_proc COMMAND test_proc)
set_tests_properties(test_proc PROPERTIES TIMEOUT 60 LABELS unit)

# Where the daemon listens when another uid holds its abstract name
# (src/common/sv_addr.c): file names, directory checks, long paths, holders.
add_executable(test_addr ${U}/test_addr.c)
target_link_libraries(test_addr PRIVATE sv_common)
add_test(NAME test_addr COMMAND test_addr)
set_tests_properties(test_addr PROPERTIES TIMEOUT 60 LABELS unit)

# The CM MAD codec (src/daemon/cm_mad.c): every message against the IBTA
# layouts, written out by hand; decode/encode round trips; refusals.
add_executable(test_cm_mad ${U}/test_cm_mad.c
  ${CMAKE_SOURCE_DIR}/src/daemon/cm_mad.c)
target_include_directories(test_cm_mad PRIVATE ${CMAKE_SOURCE_DIR}/src/daemon)
target_link_libraries(test_cm_mad PRIVATE sv_common)
add_test(NAME test_cm_mad COMMAND test_cm_mad)
set_tests_properties(test_cm_mad PROPERTIES TIMEOUT 60 LABELS unit)

# The engine's tunables and SOFTVERBS_TUNE (src/engine/sv_tune.c).
add_executable(test_tune ${U}/test_tune.c ${CMAKE_SOURCE_DIR}/src/engine/sv_tune.c)
target_include_directories(test_tune PRIVATE ${CMAKE_SOURCE_DIR}/src/engine)
target_link_libraries(test_tune PRIVATE sv_common pthread)
add_test(NAME test_tune COMMAND test_tune)
set_tests_properties(test_tune PROPERTIES TIMEOUT 60 LABELS unit)

# The responder's checks and decisions (src/engine/sv_resp_check.c) on a
# responder block of the test's own: PSN classes across the 2^24 wrap,
# duplicates (the atomic replay cache, a repeated READ), opcode sequence,
# the NAK each refusal answers with, RNR.
add_executable(test_resp ${U}/test_resp.c
  ${CMAKE_SOURCE_DIR}/src/engine/sv_resp_check.c
  ${CMAKE_SOURCE_DIR}/src/engine/sv_opcode.c)
target_include_directories(test_resp PRIVATE ${CMAKE_SOURCE_DIR}/src/engine)
target_link_libraries(test_resp PRIVATE sv_common)
add_test(NAME test_resp COMMAND test_resp)
set_tests_properties(test_resp PROPERTIES TIMEOUT 60 LABELS unit)

# The completer's decisions (src/engine/sv_comp_decide.c) without an
# engine: responses to PSNs not sent, NAK steps and retry budgets.
add_executable(test_comp ${U}/test_comp.c
  ${CMAKE_SOURCE_DIR}/src/engine/sv_comp_decide.c)
target_include_directories(test_comp PRIVATE ${CMAKE_SOURCE_DIR}/src/engine
  ${CMAKE_SOURCE_DIR}/src/common)
add_test(NAME test_comp COMMAND test_comp)
set_tests_properties(test_comp PROPERTIES TIMEOUT 60 LABELS unit)

# The lock order's run-time check (src/engine/sv_lock.h): always built
# checking here, whatever SV_LOCK_CHECK says for the library.
add_executable(test_lock ${U}/test_lock.c ${CMAKE_SOURCE_DIR}/src/engine/sv_lock.c)
target_include_directories(test_lock PRIVATE ${CMAKE_SOURCE_DIR}/src/engine
  ${CMAKE_SOURCE_DIR}/src/common)
target_compile_definitions(test_lock PRIVATE SV_LOCK_CHECK=1)
target_link_libraries(test_lock PRIVATE pthread)
add_test(NAME test_lock COMMAND test_lock)
set_tests_properties(test_lock PROPERTIES TIMEOUT 60 LABELS unit)

# The wire port's turn: one reader at a time (src/common/sv_wire.c).
add_executable(test_wire_port ${U}/test_wire_port.c)
target_link_libraries(test_wire_port PRIVATE sv_common)
add_test(NAME test_wire_port COMMAND test_wire_port)
set_tests_properties(test_wire_port PROPERTIES TIMEOUT 60 LABELS unit)

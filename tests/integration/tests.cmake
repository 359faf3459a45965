# Integration tests: real processes, real daemon.
set(D ${CMAKE_CURRENT_LIST_DIR})
sv_c_test(test_device ${D}/test_device.c)
sv_c_test(test_pd_mr ${D}/test_pd_mr.c)
sv_c_test(test_fork ${D}/test_fork.c)
sv_c_test(test_rereg ${D}/test_rereg.c)
sv_c_test(test_import ${D}/test_import.c)
sv_c_test(test_dm ${D}/test_dm.c)
sv_c_test(test_null_mr ${D}/test_null_mr.c)
sv_c_test(test_cq ${D}/test_cq.c)
sv_c_test(test_qp ${D}/test_qp.c)
sv_c_test(test_srq ${D}/test_srq.c)
# XRC (issue 24 item 1): domains, XRC SRQs, TGT and INI QPs, the data
# they move (both paths).
sv_c_test(test_xrc ${D}/test_xrc.c TIMEOUT 240)
sv_c_test_env(test_xrc_packets test_xrc SOFTVERBS_DIRECT=0)
# ... between two hosts (network namespaces, root): the XRC opcodes and
# XRCETH on the veth as tshark reads them.
sv_c_test(test_xrc_wire ${D}/test_xrc_wire.c TIMEOUT 240 LABELS wire)
sv_c_test_env(test_xrc_wire_packets test_xrc_wire SOFTVERBS_DIRECT=0)
set_tests_properties(test_xrc_wire test_xrc_wire_packets PROPERTIES
                     SKIP_RETURN_CODE 77)
sv_c_test(test_ah ${D}/test_ah.c)
sv_c_test(test_daemon ${D}/test_daemon.c TIMEOUT 300)
# Our abstract socket name held first by another uid (bound, listening,
# never accepting, answering): the owner's device on a socket in its
# private directory (src/common/sv_addr.h), the squatter sent nothing.  Root.
sv_c_test(test_daemon_squat ${D}/test_daemon_squat.c TIMEOUT 180)
sv_c_test(test_robust ${D}/test_robust.c TIMEOUT 600)
sv_script_test(cli compat/cli.sh)
sv_c_test(test_engine_rc ${D}/test_engine_rc.c TIMEOUT 120)
sv_c_test(test_engine_err ${D}/test_engine_err.c TIMEOUT 180)
sv_c_test(test_engine_mw ${D}/test_engine_mw.c TIMEOUT 120)
sv_c_test(test_engine_rmem ${D}/test_engine_rmem.c TIMEOUT 300)
sv_c_test(test_engine_fault ${D}/test_engine_fault.c TIMEOUT 300)
sv_c_test(test_engine_events ${D}/test_engine_events.c TIMEOUT 120)
# Fault plans per object (docs/faults.md), on both paths.
sv_c_test(test_fault_plan ${D}/test_fault_plan.c TIMEOUT 300)
sv_c_test_env(test_fault_plan_packets test_fault_plan SOFTVERBS_DIRECT=0)
sv_c_test(test_engine_owner ${D}/test_engine_owner.c TIMEOUT 300)
sv_c_test(test_proto ${D}/test_proto.c TIMEOUT 120)
# Loads libibverbs.so.1 itself (dlopen/dlclose): must not link it.
add_executable(test_dlclose ${D}/test_dlclose.c)
target_link_libraries(test_dlclose PRIVATE ${CMAKE_DL_LIBS})
add_dependencies(test_dlclose ibverbs softverbsd softverbs)
add_test(NAME test_dlclose COMMAND test_dlclose)
set_tests_properties(test_dlclose PROPERTIES ENVIRONMENT "${SV_TEST_ENV}" TIMEOUT 120)
sv_c_test(test_limits ${D}/test_limits.c TIMEOUT 900)
sv_c_test(test_fuzz ${D}/test_fuzz.c TIMEOUT 600)
sv_c_test(test_chaos ${D}/test_chaos.c TIMEOUT 600)
sv_c_test(test_engine_conform ${D}/test_engine_conform.c TIMEOUT 180)
sv_c_test(test_engine_direct ${D}/test_engine_direct.c TIMEOUT 180)
# The same engine cases over packets (the way when CMA is refused, and the
# wire's): SOFTVERBS_DIRECT=0 turns direct execution off.
foreach(t test_engine_rc test_engine_err test_engine_mw test_engine_rmem
          test_engine_events test_engine_owner test_engine_conform
          test_engine_direct test_srq test_qp test_cq test_null_mr)
  sv_c_test_env(${t}_packets ${t} SOFTVERBS_DIRECT=0)
endforeach()
sv_c_test(test_ud_wc ${D}/test_ud_wc.c TIMEOUT 60)
# Multicast on UD QPs: errors, limits, one-host delivery, both paths.
sv_c_test(test_mcast ${D}/test_mcast.c TIMEOUT 300)
sv_c_test_env(test_mcast_packets test_mcast SOFTVERBS_DIRECT=0)
# The port follows the namespace's network (root: a namespace of its own).
sv_c_test(test_port ${D}/test_port.c TIMEOUT 300)
# Capture (issue 9): sessions, capture rings, filters, stalled readers.
sv_c_test(test_capture ${D}/test_capture.c TIMEOUT 120 LABELS capture)
# rdma_cm semantics (issue 10): librdmacm.so.1 on the daemon's CM.
sv_c_test(test_rdmacm ${D}/test_rdmacm.c TIMEOUT 300 LABELS rdmacm)
target_link_libraries(test_rdmacm PRIVATE rdmacm)
# rsockets (rsocket.h on our librdmacm): a stream whole and in order,
# small writes gathered while there is no credit, POLLOUT, shutdown.
sv_c_test(test_rsocket ${D}/test_rsocket.c TIMEOUT 300 LABELS rdmacm)
target_link_libraries(test_rsocket PRIVATE rdmacm)
# RoCE v2 between two network namespaces through our own library, engine
# and daemon (the sanitizer build runs the wire too).  Root only.
sv_c_test(test_wire ${D}/test_wire.c TIMEOUT 300 LABELS wire)
set_tests_properties(test_wire PROPERTIES SKIP_RETURN_CODE 77)
# Multicast between two namespaces (IPv4 and IPv6 groups), both paths.
sv_c_test(test_mcast_wire ${D}/test_mcast_wire.c TIMEOUT 300 LABELS wire)
sv_c_test_env(test_mcast_wire_packets test_mcast_wire SOFTVERBS_DIRECT=0)
set_tests_properties(test_mcast_wire test_mcast_wire_packets PROPERTIES
  SKIP_RETURN_CODE 77 LABELS wire)
# Hostile packets on the wire (docs/wire.md "Hostile packets"): forged
# ACKs and NAKs, packets not from the QP's peer, UD above the MTU.  Root.
sv_c_test(test_wire_trust ${D}/test_wire_trust.c TIMEOUT 300 LABELS wire)
# The connection manager against hostile CM MADs from other hosts
# (docs/wire.md "The connection manager"): answers to the sender, clamped
# timeouts, bounded half-open connections; then a CM MAD fuzz for
# SV_FUZZ_SECONDS.  Three network namespaces; the MADs are written by the
# daemon's own cm_mad.c.  Root only.
foreach(t test_cm_hostile test_cm_fuzz)
  sv_c_test(${t} ${D}/${t}.c ${CMAKE_SOURCE_DIR}/src/daemon/cm_mad.c
            TIMEOUT 300 LABELS rdmacm wire)
  target_link_libraries(${t} PRIVATE rdmacm sv_common)
  target_include_directories(${t} PRIVATE ${CMAKE_SOURCE_DIR}/src/daemon)
endforeach()
# A stateful RC fuzzer on the wire (docs/wire.md "Hostile packets"): a
# fake peer's random but well-formed packets to a QP kept in RTS for
# SV_FUZZ_SECONDS, then memory, objects and descriptors checked and a
# legitimate exchange made.  Root only.
sv_c_test(test_wire_fuzz ${D}/test_wire_fuzz.c TIMEOUT 600 LABELS wire)
# The misuse checker (issue 25, docs/checker.md): each case runs a program
# with one bug in it with SOFTVERBS_CHECK=1 and without.  Exported symbols
# (-rdynamic): the checker names the bug's function through dladdr(3).
sv_c_test(test_check ${D}/test_check.c TIMEOUT 300)
set_target_properties(test_check PROPERTIES ENABLE_EXPORTS ON)
# ... and on the packet path (the responder's lines come from the target's
# process there, from the initiator's under direct execution).
sv_c_test_env(test_check_packets test_check SOFTVERBS_DIRECT=0)
# IBTA 1.5 ATOMIC WRITE (issue 24 item 2): both post forms, the
# responder's refusals, no torn value in a reader of the target's process,
# and between two namespaces (root; tshark reads the capture) with
# duplicated and reordered packets.  Both paths.
sv_c_test(test_atomic_write ${D}/test_atomic_write.c TIMEOUT 600 LABELS wire)
target_link_libraries(test_atomic_write PRIVATE pthread)
sv_c_test_env(test_atomic_write_packets test_atomic_write SOFTVERBS_DIRECT=0)

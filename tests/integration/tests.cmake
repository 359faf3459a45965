# Integration tests: real processes, real daemon.
set(D ${CMAKE_CURRENT_LIST_DIR})
sv_c_test(test_device ${D}/test_device.c)
sv_c_test(test_pd_mr ${D}/test_pd_mr.c)
sv_c_test(test_fork ${D}/test_fork.c)
sv_c_test(test_rereg ${D}/test_rereg.c)
sv_c_test(test_import ${D}/test_import.c)
sv_c_test(test_dm ${D}/test_dm.c)

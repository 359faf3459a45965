# Integration tests: real processes, real daemon.
set(D ${CMAKE_CURRENT_LIST_DIR})
sv_c_test(test_device ${D}/test_device.c)

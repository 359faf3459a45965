# Everything that makes softverbs an installed tool besides the binaries:
# the pkg-config file, man pages, bash completion, the docs, and the Debian
# package (CPack DEB: `./scripts/package.sh`, or `cpack` in a build tree).
#
# Installed layout (PREFIX = /usr in the package):
#   PREFIX/bin/softverbs, softverbsd, softverbs-portd
#   PREFIX/lib/systemd/system/softverbs-portd.service
#   PREFIX/LIBDIR/softverbs/   every library the build installs there
#                              (libibverbs.so.1; librdmacm.so.1 once built)
#   PREFIX/LIBDIR/pkgconfig/softverbs.pc
#   PREFIX/share/man/man1/softverbs.1.gz, man8/softverbsd.8.gz
#   PREFIX/share/bash-completion/completions/softverbs
#   PREFIX/share/doc/softverbs/  README.md, docs/*.md, copyright

# --- pkg-config: written at install time, so the prefix is the one given
# to `cmake --install --prefix` (or /usr when CPack installs).
# Written straight to its destination (several installs of one build tree
# may run at once, each with its own prefix).
install(CODE "
  set(prefix \"\${CMAKE_INSTALL_PREFIX}\")
  set(SV_PRIVLIBDIR \"${SV_PRIVLIBDIR}\")
  set(PROJECT_VERSION \"${PROJECT_VERSION}\")
  set(pc \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig/softverbs.pc\")
  message(STATUS \"Installing: \$ENV{DESTDIR}\${pc}\")
  configure_file(\"${CMAKE_SOURCE_DIR}/packaging/softverbs.pc.in\"
                 \"\$ENV{DESTDIR}\${pc}\" @ONLY)
  list(APPEND CMAKE_INSTALL_MANIFEST_FILES \"\${pc}\")
")

# --- man pages: made from the built binaries' --help and the variables of
# docs/environment.md (cmake/gen_man.sh), then gzipped as Debian wants.
set(SV_MAN_DIR ${CMAKE_BINARY_DIR}/man)
set(SV_MAN_PAGES)
foreach(page softverbs.1 softverbsd.8)
  add_custom_command(
    OUTPUT ${SV_MAN_DIR}/${page} ${SV_MAN_DIR}/${page}.gz
    COMMAND ${CMAKE_COMMAND} -E make_directory ${SV_MAN_DIR}
    COMMAND sh ${CMAKE_SOURCE_DIR}/cmake/gen_man.sh
            ${CMAKE_SOURCE_DIR}/docs/man/${page}.in ${SV_MAN_DIR}/${page}
            ${CMAKE_BINARY_DIR}/bin ${CMAKE_SOURCE_DIR}/docs/environment.md
    COMMAND gzip -9nfk ${SV_MAN_DIR}/${page}
    DEPENDS softverbs softverbsd ibverbs ${CMAKE_SOURCE_DIR}/docs/man/${page}.in
            ${CMAKE_SOURCE_DIR}/cmake/gen_man.sh ${CMAKE_SOURCE_DIR}/docs/environment.md
    COMMENT "Generating man page ${page}" VERBATIM)
  list(APPEND SV_MAN_PAGES ${SV_MAN_DIR}/${page}.gz)
endforeach()
add_custom_target(sv_man ALL DEPENDS ${SV_MAN_PAGES})
install(FILES ${SV_MAN_DIR}/softverbs.1.gz
        DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${SV_MAN_DIR}/softverbsd.8.gz
        DESTINATION ${CMAKE_INSTALL_MANDIR}/man8)

# --- the port service's systemd unit (docs/wire.md "Who owns port 4791"),
# naming the binary under the prefix of this install (the package's /usr,
# or `cmake --install --prefix`), written at install time like the .pc.
install(CODE "
  set(SV_PORTD \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/softverbs-portd\")
  set(unit \"\${CMAKE_INSTALL_PREFIX}/lib/systemd/system/softverbs-portd.service\")
  message(STATUS \"Installing: \$ENV{DESTDIR}\${unit}\")
  configure_file(\"${CMAKE_SOURCE_DIR}/packaging/systemd/softverbs-portd.service.in\"
                 \"\$ENV{DESTDIR}\${unit}\" @ONLY)
  list(APPEND CMAKE_INSTALL_MANIFEST_FILES \"\${unit}\")
")

# --- bash completion (found by bash-completion's loader under
# PREFIX/share when PREFIX/share is in XDG_DATA_DIRS: /usr, /usr/local).
install(FILES ${CMAKE_SOURCE_DIR}/packaging/bash-completion/softverbs
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)

# --- docs that travel with the code.
file(GLOB SV_DOCS ${CMAKE_SOURCE_DIR}/docs/*.md)
install(FILES ${CMAKE_SOURCE_DIR}/README.md ${SV_DOCS}
              ${CMAKE_SOURCE_DIR}/packaging/copyright
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

# --- the Debian package: `cpack` in a build tree (scripts/package.sh).
# Whatever the install rules above put under PREFIX is packaged, so a
# library installed into SV_PRIVLIBDIR later (librdmacm.so.1) is in the
# package without a change here.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME softverbs)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# Install with DESTDIR and CMAKE_INSTALL_PREFIX=/usr: the .pc gets /usr.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_CONTACT "softverbs developers <softverbs@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "user-space RDMA device: unmodified verbs programs without an RDMA NIC")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
"softverbs runs programs written against rdma-core's libibverbs on any
 Linux machine, as any user: no RDMA NIC, no kernel module, no root.
 .
 The package holds the softverbs command, the device daemon softverbsd, and
 a drop-in libibverbs.so.1 in a private folder (/usr/lib/softverbs): only
 programs started with `softverbs run`, or linked with
 `pkg-config --libs softverbs`, use it; the system's rdma-core serves every
 other program.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Runtime dependencies come from the binaries (libc6); rdma-core's
# providers are not needed.  The verbs headers (libibverbs-dev) matter only
# to build programs with the .pc; ibverbs-utils has programs to try.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "ibverbs-utils")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libibverbs-dev, pkg-config, perftest, bash-completion")
# postinst: the port service starts at boot where systemd runs
# (packaging/deb/postinst.in); prerm: stop every running daemon of the
# package and the service (packaging/deb/prerm.in).
set(SV_DAEMON ${CPACK_PACKAGING_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/softverbsd)
set(SV_PORTD ${CPACK_PACKAGING_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/softverbs-portd)
configure_file(${CMAKE_SOURCE_DIR}/packaging/deb/prerm.in
               ${CMAKE_BINARY_DIR}/gen/deb/prerm @ONLY)
configure_file(${CMAKE_SOURCE_DIR}/packaging/deb/postinst.in
               ${CMAKE_BINARY_DIR}/gen/deb/postinst @ONLY)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${CMAKE_BINARY_DIR}/gen/deb/prerm
    ${CMAKE_BINARY_DIR}/gen/deb/postinst)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)

/* SPDX-License-Identifier: MIT */
/*
 * Which build a binary is (src/common/sv_build.c, cmake/build_id.cmake).
 */
#ifndef SV_BUILD_H
#define SV_BUILD_H

/* Precedes the build id in every binary's bytes. */
#define SV_BUILD_MARKER "@(#)softverbs-build "

/* "VERSION" or "VERSION (git DESCRIBE)" of this binary. */
const char *sv_build_id(void);

#endif

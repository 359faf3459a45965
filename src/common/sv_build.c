/* SPDX-License-Identifier: MIT */
/*
 * The build marker (cmake/build_id.cmake): linked into the library, the
 * daemon and the command so that `softverbs --version` can read the build
 * of any of these files, running or not, by searching its bytes for
 * SV_BUILD_MARKER.  Hidden: never part of libibverbs.so.1's ABI.
 */
#include "sv_build.h"
#include "sv_build_id.h"

__attribute__((used)) const char sv_build_marker[] =
	SV_BUILD_MARKER SV_BUILD_ID;

const char *sv_build_id(void)
{
	return sv_build_marker + sizeof(SV_BUILD_MARKER) - 1;
}

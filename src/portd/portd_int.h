/* SPDX-License-Identifier: MIT */
/* The port service's parts (portd.c, steer.c); the protocol is sv_portd.h. */
#ifndef PORTD_INT_H
#define PORTD_INT_H

#include "sv_log.h"
#include "sv_portd.h"

#include <stdint.h>

#define PORTD_BLOCKS SV_PORTD_BLOCKS

/* The steering program and its map (steer.c). */
struct portd_steer {
	int map, prog;
};

/* Loads the program and makes its map: 0 or -errno (EPERM: not root). */
int portd_steer_init(struct portd_steer *s);
/* Makes the program the reuseport group's of sock (any member). */
int portd_steer_attach(struct portd_steer *s, int sock);
/* Block's datagrams go to sock (a member of the group) from now on. */
int portd_steer_set(struct portd_steer *s, uint32_t block, int sock);
/* Block's datagrams go to the service's socket (key 0) again. */
void portd_steer_clear(struct portd_steer *s, uint32_t block);

#endif

/* SPDX-License-Identifier: MIT */
/* Fork safety: ibv_fork_init and the dontfork/dofork range counts. */
#include "verbs_int.h"

void sv_fork_env_init(void)
{
}

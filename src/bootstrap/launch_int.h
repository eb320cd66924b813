/* launch_int.h - the pieces of launcher detection (launch_env.c) kept apart. */
#ifndef RING_LAUNCH_INT_H
#define RING_LAUNCH_INT_H

#include <ringd/launch.h>

/* Fill rank, world size, peers and role of *l from TF_CONFIG's JSON text
 * (tf_config.c); RING_ERR_INVALID naming what is wrong with it. */
ring_status_t ring_tf_config_parse(const char *json, ring_launch_t *l);

#endif /* RING_LAUNCH_INT_H */

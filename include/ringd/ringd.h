/*
 * ringd/ringd.h - the whole public API of libringd.
 *
 *   ring_config_t cfg;
 *   ring_config_init(&cfg);
 *   ring_config_load_env(&cfg);          // RING_RANK, RING_WORLD_SIZE, RING_PEERS, ...
 *   ring_comm_t *comm;
 *   if (ring_comm_open(&cfg, &comm) != RING_OK)
 *       fprintf(stderr, "%s\n", ring_last_error());
 *   ring_allreduce(comm, grad, grad, n, RING_FLOAT32, RING_AVG);
 *   ring_comm_close(comm);
 *   ring_config_free(&cfg);
 *
 * The library never exits, aborts or prints unless logging is enabled
 * (RING_LOG_LEVEL=info|debug|trace, or RING_DEBUG=1).
 */
#ifndef RINGD_RINGD_H
#define RINGD_RINGD_H

#include <ringd/status.h>
#include <ringd/config.h>
#include <ringd/comm.h>
#include <ringd/ssp.h>
#include <ringd/elastic.h>

#endif /* RINGD_RINGD_H */

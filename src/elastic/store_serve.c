/*
 * store_serve.c - ring_rendezvous_server_start: a launcher serves an elastic
 * job's rendezvous store itself, so that the store outlives any rank (ranks
 * may all be lost and replaced). The job's rank 0 then finds it served and
 * is a client like the others (core/rendezvous.c).
 */
#include "ring_build.h"

#include <stdlib.h>

#include <ringd/elastic.h>

#include "auth.h"
#include "errors.h"
#include "rdzv_record.h"
#include "store.h"

struct ring_rendezvous_server {
    ring_store_server_t *srv;
};

ring_status_t ring_rendezvous_server_start(const ring_config_t *cfg,
                                           ring_rendezvous_server_t **srv_p)
{
    ring_rendezvous_server_t *s;
    ring_rdzv_url_t url;
    ring_auth_key_t key;
    char why[300];
    ring_status_t st;

    if (cfg == NULL || srv_p == NULL)
        return ring_error_set(RING_ERR_INVALID, "ring_rendezvous_server_start: cfg and srv_p "
                              "must not be NULL");
    *srv_p = NULL;
    if (ring_rdzv_url_parse(cfg->rendezvous, &url, why, sizeof(why)) != 0 ||
        url.kind != RING_RDZV_TCP)
        return ring_error_set(RING_ERR_INVALID, "ring_rendezvous_server_start: --rendezvous "
                              "'%s' must be tcp://HOST:PORT", cfg->rendezvous);
    RING_CHECK(ring_auth_key_load(cfg, &key));
    if ((s = calloc(1, sizeof(*s))) == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the rendezvous store");
    /* elastic: it serves until stopped, with room for 4 x the job's peers */
    st = ring_store_server_start(url.host, url.port, cfg->job_id,
                                 -(cfg->world_size > 0 ? cfg->world_size : 1), &key, &s->srv);
    if (st != RING_OK) {
        free(s);
        return st;
    }
    *srv_p = s;
    return RING_OK;
}

void ring_rendezvous_server_stop(ring_rendezvous_server_t *srv)
{
    if (srv == NULL)
        return;
    ring_store_server_stop(srv->srv, "the launcher that served the store has ended");
    free(srv);
}

/*
 * t-launch-config.c - how ring_config_load_env applies a launcher's
 * variables below the RING_* variables (src/config.c; t-launch tests what
 * the variables say), the rendezvous URL parser (src/rendezvous.c), and the
 * ring's order by host and its description (src/ring_order.c).
 *
 * The test may itself run under Slurm, mpirun or torchrun: clear_env()
 * removes every variable the detection reads before each case.
 */
#include "ring_build.h" /* _GNU_SOURCE for setenv */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ringd/config.h>
#include <ringd/launch.h>
#include <ringd/ringd.h>

#include "errors.h"
#include "launch_env_test.h"
#include "rendezvous.h"
#include "ring_order.h"
#include "tap.h"

/* ---- ring_config_load_env -------------------------------------------- */

#define SLURM4 "SLURM_PROCID", "2", "SLURM_STEP_NUM_TASKS", "4", "SLURM_LOCALID", "0", \
               "SLURM_STEP_NODELIST", "node[01-04]", "SLURM_JOB_ID", "99", "SLURM_STEP_ID", "1"

static const char *src_name(ring_config_source_t s)
{
    static const char *const names[] = {"default", "env", "flag", "api", "launcher"};
    return (unsigned)s < 5 ? names[s] : "?";
}

static void is_src(const ring_config_t *cfg, const char *name, ring_config_source_t want,
                   const char *what)
{
    ring_config_source_t got = ring_config_source(cfg, name);

    ok(got == want, "%s: %s from %s (%s)", what, name, src_name(want), src_name(got));
}

static ring_status_t load(ring_config_t *cfg)
{
    ring_status_t st;

    ring_config_init(cfg);
    st = ring_config_load_env(cfg);
    if (st != RING_OK)
        diag("ring_config_load_env: %s", ring_last_error());
    return st;
}

static void test_config(void)
{
    ring_config_t cfg;
    ring_status_t st;
    char launcher_url[RING_LAUNCH_STR];

    /* nothing set: the defaults */
    clear_env();
    is_int(load(&cfg), RING_OK, "config, no launcher: loads");
    ok(cfg.rank == -1 && cfg.world_size == 0 && cfg.rendezvous[0] == '\0' &&
           strcmp(cfg.job_id, "0") == 0,
       "config, no launcher: rank -1, world 0, no rendezvous, job id 0");
    is_src(&cfg, "rank", RING_SRC_DEFAULT, "config, no launcher");
    is_src(&cfg, "job-id", RING_SRC_DEFAULT, "config, no launcher");
    is_int(ring_config_uses_rendezvous(&cfg), 0, "config, no launcher: no rendezvous");
    is_str(cfg.launch.launcher, "", "config, no launcher: cfg.launch is empty");
    ring_config_free(&cfg);

    /* Slurm fills what no RING_* variable gave */
    only_env(SLURM4, NULL);
    is_int(load(&cfg), RING_OK, "config under slurm: loads");
    is_int(cfg.rank, 2, "config under slurm: rank 2");
    is_int(cfg.world_size, 4, "config under slurm: world size 4");
    like(cfg.rendezvous, "tcp://node01:", "config under slurm: rendezvous on the first node");
    is_str(cfg.job_id, "slurm-99.1", "config under slurm: job id");
    is_src(&cfg, "rank", RING_SRC_LAUNCHER, "config under slurm");
    is_src(&cfg, "world-size", RING_SRC_LAUNCHER, "config under slurm");
    is_src(&cfg, "rendezvous", RING_SRC_LAUNCHER, "config under slurm");
    is_src(&cfg, "job-id", RING_SRC_LAUNCHER, "config under slurm");
    is_src(&cfg, "peers", RING_SRC_DEFAULT, "config under slurm");
    is_src(&cfg, "chunk-size", RING_SRC_DEFAULT, "config under slurm");
    is_src(&cfg, "no-such-setting", RING_SRC_DEFAULT, "config under slurm (unknown name)");
    is_str(cfg.launch.launcher, "slurm", "config under slurm: cfg.launch says slurm");
    is_str(cfg.rendezvous, cfg.launch.rendezvous, "config under slurm: the launcher's URL");
    is_int(ring_config_uses_rendezvous(&cfg), 1, "config under slurm: uses the rendezvous");
    st = ring_config_validate(&cfg);
    if (!is_int(st, RING_OK, "config under slurm: validate accepts a rendezvous without peers"))
        diag("%s", ring_last_error());
    snprintf(launcher_url, sizeof(launcher_url), "%s", cfg.rendezvous);

    /* a flag's peer list after the environment beats the launcher's rendezvous */
    ok(ring_config_set(&cfg, "peers", "a:1,b:1,c:1,d:1", RING_SRC_FLAG) == RING_OK,
       "config under slurm: --peers set");
    is_src(&cfg, "rendezvous", RING_SRC_LAUNCHER, "config under slurm, --peers");
    is_int(ring_config_uses_rendezvous(&cfg), 0, "config under slurm: --peers beats the "
           "launcher's rendezvous");
    is_int(ring_config_validate(&cfg), RING_OK, "config under slurm, --peers: validates");
    /* a bad --iface spec */
    ok(ring_config_set(&cfg, "iface", "^", RING_SRC_API) == RING_OK, "iface '^' is stored");
    ring_error_set(RING_ERR_INTERNAL, "(stale)");
    is_int(ring_config_validate(&cfg), RING_ERR_INVALID, "iface '^': validate refuses it");
    like(ring_last_error(), "--iface", "iface '^': the message names --iface");
    like(ring_last_error(), "RING_SOCKET_IFNAME", "iface '^': the message names "
         "RING_SOCKET_IFNAME");
    ring_config_free(&cfg);

    /* the user's RING_RANK wins */
    only_env(SLURM4, "RING_RANK", "3", NULL);
    is_int(load(&cfg), RING_OK, "config, RING_RANK under slurm: loads");
    is_int(cfg.rank, 3, "config, RING_RANK=3 under slurm: rank 3");
    is_src(&cfg, "rank", RING_SRC_ENV, "config, RING_RANK under slurm");
    ring_config_free(&cfg);
    only_env(SLURM4, "RING_RANK", "3", "RING_WORLD_SIZE", "8", NULL);
    is_int(load(&cfg), RING_OK, "config, RING_RANK and RING_WORLD_SIZE under slurm: loads");
    ok(cfg.rank == 3 && cfg.world_size == 8, "config, RING_* under slurm: rank 3 of 8");
    is_src(&cfg, "world-size", RING_SRC_ENV, "config, RING_* under slurm");
    is_str(cfg.launch.launcher, "ring", "config, RING_* under slurm: launcher ring");
    ring_config_free(&cfg);

    /* RING_PEERS: no rendezvous, though the launcher found one */
    only_env(SLURM4, "RING_PEERS", "a:1,b:1,c:1,d:1", NULL);
    is_int(load(&cfg), RING_OK, "config, RING_PEERS under slurm: loads");
    is_str(cfg.launch.rendezvous, launcher_url, "config, RING_PEERS under slurm: the launcher "
           "found its rendezvous");
    is_src(&cfg, "peers", RING_SRC_ENV, "config, RING_PEERS under slurm");
    is_int(ring_config_uses_rendezvous(&cfg), 0, "config, RING_PEERS under slurm: the peer "
           "list, not the rendezvous");
    is_src(&cfg, "rank", RING_SRC_LAUNCHER, "config, RING_PEERS under slurm");
    is_int(ring_config_validate(&cfg), RING_OK, "config, RING_PEERS under slurm: validates");
    ring_config_free(&cfg);

    /* RING_RENDEZVOUS: used, over the launcher's */
    only_env(SLURM4, "RING_RENDEZVOUS", "file:///shared/rdzv", NULL);
    is_int(load(&cfg), RING_OK, "config, RING_RENDEZVOUS under slurm: loads");
    is_str(cfg.rendezvous, "file:///shared/rdzv", "config, RING_RENDEZVOUS: its value");
    is_src(&cfg, "rendezvous", RING_SRC_ENV, "config, RING_RENDEZVOUS under slurm");
    is_int(ring_config_uses_rendezvous(&cfg), 1, "config, RING_RENDEZVOUS: used");
    is_int(ring_config_validate(&cfg), RING_OK, "config, RING_RENDEZVOUS file://: validates");
    ring_config_free(&cfg);
    only_env("RING_RANK", "0", "RING_WORLD_SIZE", "2", "RING_RENDEZVOUS", "tcp://h:1",
             "RING_PEERS", "a:1,b:1", NULL);
    is_int(load(&cfg), RING_OK, "config, RING_RENDEZVOUS and RING_PEERS: loads");
    is_int(ring_config_uses_rendezvous(&cfg), 1, "config, the user's RING_RENDEZVOUS is used "
           "even with RING_PEERS");
    ring_config_free(&cfg);

    /* a bad RING_RENDEZVOUS, named by validate */
    only_env("RING_RANK", "0", "RING_WORLD_SIZE", "2", "RING_RENDEZVOUS", "tcp://store", NULL);
    is_int(load(&cfg), RING_OK, "config, RING_RENDEZVOUS=tcp://store: loads");
    ring_error_set(RING_ERR_INTERNAL, "(stale)");
    is_int(ring_config_validate(&cfg), RING_ERR_INVALID, "config, RING_RENDEZVOUS=tcp://store: "
           "validate refuses it");
    like(ring_last_error(), "RING_RENDEZVOUS", "bad rendezvous: the message names "
         "RING_RENDEZVOUS");
    like(ring_last_error(), "tcp://store", "bad rendezvous: the message quotes it");
    ring_config_free(&cfg);

    /* the port argument is --port / RING_PORT */
    only_env("RING_PORT", "31000", "OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "2",
             "OMPI_COMM_WORLD_LOCAL_SIZE", "2", NULL);
    is_int(load(&cfg), RING_OK, "config, openmpi with RING_PORT: loads");
    is_str(cfg.rendezvous, "tcp://127.0.0.1:31000", "config, openmpi on one host: the store at "
           "RING_PORT");
    ring_config_free(&cfg);

    /* torchrun's job id and store */
    only_env("RANK", "1", "WORLD_SIZE", "2", "MASTER_ADDR", "10.0.0.1", "MASTER_PORT", "29400",
             "TORCHELASTIC_RUN_ID", "xyz", NULL);
    is_int(load(&cfg), RING_OK, "config under torchrun: loads");
    ok(cfg.rank == 1 && cfg.world_size == 2 &&
           strcmp(cfg.rendezvous, "tcp://10.0.0.1:29401") == 0 &&
           strcmp(cfg.job_id, "torch-xyz") == 0,
       "config under torchrun: rank 1 of 2, tcp://10.0.0.1:29401, job torch-xyz");
    is_int(ring_config_validate(&cfg), RING_OK, "config under torchrun: validates");
    ring_config_free(&cfg);

    /* TF_CONFIG's peer list */
    tf(TF_CW, "\"type\": \"worker\", \"index\": 1");
    is_int(load(&cfg), RING_OK, "config, TF_CONFIG: loads");
    ok(cfg.rank == 2 && cfg.world_size == 3 &&
           strcmp(cfg.peers, "c0:2222,w0:2222,w1:2222") == 0,
       "config, TF_CONFIG: rank 2 of 3 with the cluster's peers");
    is_src(&cfg, "peers", RING_SRC_LAUNCHER, "config, TF_CONFIG");
    is_int(ring_config_uses_rendezvous(&cfg), 0, "config, TF_CONFIG: the static peer list");
    is_int(ring_config_validate(&cfg), RING_OK, "config, TF_CONFIG: validates");
    ring_config_free(&cfg);

    /* a launcher's malformed variable fails the load, named */
    only_env("SLURM_PROCID", "abc", NULL);
    ring_config_init(&cfg);
    ring_error_set(RING_ERR_INTERNAL, "(stale)");
    is_int(ring_config_load_env(&cfg), RING_ERR_INVALID, "config, SLURM_PROCID=abc: refused");
    like(ring_last_error(), "SLURM_PROCID", "config, SLURM_PROCID=abc: the message names it");
    ring_config_free(&cfg);
}

/* ---- ring_rdzv_url_parse --------------------------------------------- */

static void url_tcp(const char *url, const char *host, int port)
{
    ring_rdzv_url_t u;
    char why[256] = "";
    int rc = ring_rdzv_url_parse(url, &u, why, sizeof(why));

    ok(rc == 0 && u.kind == RING_RDZV_TCP && strcmp(u.host, host) == 0 && u.port == port,
       "'%s' -> tcp host '%s' port %d%s%s", url, rc == 0 ? u.host : "?", rc == 0 ? u.port : -1,
       rc == 0 ? "" : ": ", why);
}

static void url_file(const char *url, const char *path)
{
    ring_rdzv_url_t u;
    char why[256] = "";
    int rc = ring_rdzv_url_parse(url, &u, why, sizeof(why));

    ok(rc == 0 && u.kind == RING_RDZV_FILE && strcmp(u.path, path) == 0,
       "'%s' -> file '%s'%s%s", url, rc == 0 ? u.path : "?", rc == 0 ? "" : ": ", why);
}

static void url_bad(const char *url, const char *word)
{
    ring_rdzv_url_t u;
    char why[256] = "";
    int rc = ring_rdzv_url_parse(url, &u, why, sizeof(why));

    ok(rc == -1 && strstr(why, word) != NULL, "'%.60s%s' refused: %s", url,
       strlen(url) > 60 ? "..." : "", why);
}

static void test_urls(void)
{
    char long_url[5000];

    url_tcp("tcp://store.example:29500", "store.example", 29500);
    url_tcp("tcp://10.0.0.1:1", "10.0.0.1", 1);
    url_tcp("tcp://h:65535", "h", 65535);
    url_tcp("tcp://[::1]:29500", "::1", 29500);
    url_tcp("tcp://[fd00::1:2]:80", "fd00::1:2", 80);
    url_tcp("tcp://[fe80::1%eth0]:5", "fe80::1%eth0", 5);
    url_file("file:///shared/rdzv", "/shared/rdzv");
    url_file("file:///", "/");
    url_bad("", "expected tcp://HOST:PORT or file:///DIR");
    url_bad("http://h:1", "expected tcp://HOST:PORT or file:///DIR");
    url_bad("store:29500", "expected tcp://HOST:PORT or file:///DIR");
    url_bad("tcp://store", "expected tcp://HOST:PORT");
    url_bad("tcp://::1:29500", "IPv6 as tcp://[ADDR]:PORT");
    url_bad("tcp://[::1]", "brackets and a port");
    url_bad("tcp://[::1]29500", "brackets and a port");
    url_bad("tcp://[::1:29500", "brackets and a port");
    url_bad("tcp://:29500", "empty");
    url_bad("tcp://[]:29500", "empty");
    url_bad("tcp://h:0", "1..65535");
    url_bad("tcp://h:65536", "1..65535");
    url_bad("tcp://h:-1", "1..65535");
    url_bad("tcp://h:", "1..65535");
    url_bad("tcp://h:http", "1..65535");
    url_bad("tcp://h:29500/", "1..65535");
    url_bad("file://relative/dir", "absolute");
    url_bad("file://", "absolute");
    memcpy(long_url, "tcp://", 6);
    memset(long_url + 6, 'h', 300);
    snprintf(long_url + 306, sizeof(long_url) - 306, ":1");
    url_bad(long_url, "too long");
    memcpy(long_url, "file://", 7);
    memset(long_url + 7, '/', 4500);
    long_url[4507] = '\0';
    url_bad(long_url, "too long");
}

/* ---- ring order ------------------------------------------------------ */

static const char *join(const int *order, int n)
{
    static char buf[512];
    size_t used = 0;

    buf[0] = '\0';
    for (int i = 0; i < n && used < sizeof(buf); i++)
        used += (size_t)snprintf(buf + used, sizeof(buf) - used, "%s%d", i ? "," : "", order[i]);
    return buf;
}

/* order by host, then its description */
static void by_host(const char *const *hosts, int n, const char *want_order, const char *want)
{
    int order[64] = {0}, rc = ring_order_by_host(hosts, n, order);
    char desc[512];

    ok(rc == 0 && strcmp(join(order, n), want_order) == 0, "by host: order %s (want %s)",
       join(order, n), want_order);
    ring_order_describe(hosts, order, n, desc, sizeof(desc));
    is_str(desc, want, "by host: '%s'", want);
}

static void test_order(void)
{
    static const char *const abab[] = {"a", "b", "a", "b"};
    static const char *const baba[] = {"b", "a", "b", "a"};
    static const char *const same[] = {"h", "h", "h", "h"};
    static const char *const xyz[] = {"x", "y", "z"};
    static const char *const aabba[] = {"a", "a", "b", "b", "a"};
    static const char *const solo[] = {"solo"};
    static const char *const two[] = {"a", "b"};
    const char *many[64];
    char names[64][16], full[1024], buf[64];
    int order[64], rc;

    by_host(abab, 4, "0,2,1,3", "a[0,2] -> b[1,3]");
    by_host(baba, 4, "0,2,1,3", "b[0,2] -> a[1,3]");
    by_host(same, 4, "0,1,2,3", "h[0-3]");
    by_host(xyz, 3, "0,1,2", "x[0] -> y[1] -> z[2]");
    by_host(aabba, 5, "0,1,4,2,3", "a[0-1,4] -> b[2-3]");
    by_host(solo, 1, "0", "solo[0]");

    ring_order_by_rank(5, order);
    is_str(join(order, 5), "0,1,2,3,4", "by rank: the identity");
    ring_order_by_rank(4, order);
    ring_order_describe(abab, order, 4, full, sizeof(full));
    is_str(full, "a[0] -> b[1] -> a[2] -> b[3]", "by rank over a,b,a,b: each rank its own hop");

    /* 64 ranks, 8 hosts round robin: a long description */
    for (int i = 0; i < 64; i++) {
        snprintf(names[i], sizeof(names[i]), "host-%02d", i % 8);
        many[i] = names[i];
    }
    rc = ring_order_by_host(many, 64, order);
    ok(rc == 0 && order[0] == 0 && order[1] == 8 &&
           order[7] == 56 && order[8] == 1 && order[63] == 63,
       "by host, 8 hosts x 8 ranks round robin: host-00's ranks first (%d,%d,..,%d,%d)",
       order[0], order[1], order[8], order[63]);
    ring_order_describe(many, order, 64, full, sizeof(full));
    like(full, "host-00[0,8,16,24,32,40,48,56] -> host-01[1,9,", "the full description (%zu "
         "bytes)", strlen(full));
    memset(buf, 0x5a, sizeof(buf));
    ring_order_describe(many, order, 64, buf, 32);
    ok((unsigned char)buf[32] == 0x5a && memchr(buf, '\0', 32) != NULL,
       "a 32-byte buffer: nothing written past it");
    ok(strlen(buf) == 31 && strcmp(buf + 28, "...") == 0 && strncmp(buf, full, 28) == 0,
       "a 32-byte buffer: cut with '...': '%s'", buf);

    /* every buffer size: never past len, the whole text or a prefix cut with "..." */
    {
        static const char *const hosts[] = {"a", "b", "a", "c"};
        int bad_over = 0, bad_cut = 0, worst_len = 0;
        size_t flen;

        ring_order_by_host(hosts, 4, order);
        ring_order_describe(hosts, order, 4, full, sizeof(full));
        flen = strlen(full); /* "a[0,2] -> b[1] -> c[3]" */
        for (size_t len = 1; len <= flen + 2; len++) {
            memset(buf, 0x5a, sizeof(buf));
            ring_order_describe(hosts, order, 4, buf, len);
            if ((unsigned char)buf[len] != 0x5a || memchr(buf, '\0', len) == NULL) {
                bad_over++;
                continue;
            }
            if (len > flen ? strcmp(buf, full) != 0
                           : len > 4 && (strlen(buf) != len - 1 || strcmp(buf + len - 4, "...") != 0 ||
                                         strncmp(buf, full, len - 4) != 0)) {
                if (bad_cut++ == 0)
                    worst_len = (int)len;
            }
        }
        ok(bad_over == 0, "describe with every buffer size 1..%zu: never past the buffer",
           flen + 2);
        ok(bad_cut == 0, "describe with every buffer size 5..%zu: the text, or cut with '...'",
           flen + 2);
        if (bad_cut != 0) {
            ring_order_describe(hosts, order, 4, buf, (size_t)worst_len);
            diag("%d sizes wrong, first len %d: '%s' (full '%s')", bad_cut, worst_len, buf,
                 full);
        }
    }
    ring_order_describe(two, (const int[]){0, 1}, 2, buf, 5);
    ok(strcmp(buf, "a...") == 0, "'a[0] -> b[1]' in 5 bytes: 'a...' (got '%s')", buf);
}

int main(void)
{
    plan(115);
    test_config();
    test_urls();
    test_order();
    clear_env();
    return done_testing();
}

/*
 * ringd/config.h - the communicator's settings and the one table behind them.
 *
 * Every setting has a name ("chunk-size"), a command-line flag
 * (--chunk-size), an environment variable (RING_CHUNK_SIZE), a default, a
 * unit and a one-line doc, all kept in one table inside libringd, so
 * parsers, --help and --print-config cannot drift apart.
 *
 * Precedence: defaults < a launcher's variables (ringd/launch.h) < RING_*
 * variables < flags (ring_config_set calls made after ring_config_load_env
 * win).
 */
#ifndef RINGD_CONFIG_H
#define RINGD_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <ringd/launch.h>
#include <ringd/status.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RING_CONFIG_STR_MAX 256

/* Where a setting's value came from (for --print-config). */
typedef enum ring_config_source {
    RING_SRC_DEFAULT = 0,
    RING_SRC_ENV,
    RING_SRC_FLAG,
    RING_SRC_API,
    RING_SRC_LAUNCHER    /* a launcher's variables (ringd/launch.h), below RING_* ones */
} ring_config_source_t;

/*
 * The choices of the enumerated settings. Each field of ring_config_t below
 * that holds one is an int-sized enum whose values are the positions of the
 * setting's words ("auto|tcp|shm|verbs": RING_CFG_TRANSPORT_AUTO is 0), parsed
 * once from the words by ring_config_set, the RING_* variables and the flags.
 * Read and write them as words by name with ring_config_get and
 * ring_config_set (what --print-config shows), or compare the fields with
 * these. The on/off settings are ints: 1 on, 0 off.
 */
typedef enum ring_cfg_transport {    /* --transport auto|tcp|shm|verbs */
    RING_CFG_TRANSPORT_AUTO = 0,
    RING_CFG_TRANSPORT_TCP,
    RING_CFG_TRANSPORT_SHM,
    RING_CFG_TRANSPORT_VERBS
} ring_cfg_transport_t;

typedef enum ring_cfg_codec {        /* --codec none|fp16|bf16 */
    RING_CFG_CODEC_NONE = 0,
    RING_CFG_CODEC_FP16,
    RING_CFG_CODEC_BF16,
    RING_CFG_CODEC_AUTO       /* fp16 or none, whichever allreduces faster on this ring
                               * (src/diag/codec_fit.c) */
} ring_cfg_codec_t;

typedef enum ring_cfg_lz4 {          /* --lz4 off|on|auto */
    RING_CFG_LZ4_OFF = 0,
    RING_CFG_LZ4_ON,
    RING_CFG_LZ4_AUTO
} ring_cfg_lz4_t;

typedef enum ring_cfg_hier {         /* --hierarchical auto|on|off */
    RING_CFG_HIER_AUTO = 0,
    RING_CFG_HIER_ON,
    RING_CFG_HIER_OFF
} ring_cfg_hier_t;

typedef enum ring_cfg_algo {         /* --algo auto|ring|rd|direct */
    RING_CFG_ALGO_AUTO = 0,
    RING_CFG_ALGO_RING,
    RING_CFG_ALGO_RD,
    RING_CFG_ALGO_DIRECT
} ring_cfg_algo_t;

typedef enum ring_cfg_auth {         /* --auth connect|frames|encrypt */
    RING_CFG_AUTH_CONNECT = 0,
    RING_CFG_AUTH_FRAMES,
    RING_CFG_AUTH_ENCRYPT
} ring_cfg_auth_t;

typedef enum ring_cfg_log {          /* --log-level none|error|warn|info|debug|trace */
    RING_CFG_LOG_NONE = 0,
    RING_CFG_LOG_ERROR,
    RING_CFG_LOG_WARN,
    RING_CFG_LOG_INFO,
    RING_CFG_LOG_DEBUG,
    RING_CFG_LOG_TRACE
} ring_cfg_log_t;

typedef enum ring_cfg_order {        /* --ring-order host|rank */
    RING_CFG_ORDER_HOST = 0,
    RING_CFG_ORDER_RANK
} ring_cfg_order_t;

typedef struct ring_config {
    int rank;                 /* this peer's rank, 0..world_size-1 */
    int world_size;           /* number of peers in the ring */
    char *peers;              /* "host:port,host:port,..." one entry per rank (owned) */
    ring_cfg_transport_t transport; /* auto (default), tcp, shm or verbs */
    ring_cfg_codec_t codec;   /* none (default), fp16 or bf16: what travels on the wire */
    int fp16_scaling;         /* 1 (default): a power-of-two scale per fp16 chunk */
    ring_cfg_lz4_t lz4;       /* off (default), on or auto: lz4 on encoded chunks */
    int error_feedback;       /* 1: keep what encoding lost for the next call; default 0 */
    int progress_thread;      /* 1: a thread advances requests (comm.h, Threads); default 0 */
    int elastic;              /* 1: peers may join a running ring through its rendezvous
                               * store (ringd/elastic.h); default 0 */
    ring_cfg_hier_t hierarchical; /* auto (default), on or off: local + cross rings
                               * (src/algo/hier.c) */
    size_t hier_min_bytes;    /* smaller allreduces stay on the flat ring */
    ring_cfg_algo_t algo;     /* auto (default), ring, rd: recursive doubling
                               * (src/algo/rd.c), or direct (src/algo/direct.c) */
    size_t rd_max_bytes;      /* algo auto: the largest allreduce rd takes */
    size_t rh_max_bytes;      /* algo auto, N a power of two >= 4: Rabenseifner's algorithm
                               * takes larger ones up to this (src/algo/rd_plan.c) */
    size_t rh_piece_bytes;    /* ... and runs those larger than this in pieces of it, one
                               * after the other (src/algo/rd.c); 0: the whole buffer */
    int rd_fit;               /* 1 (on): at start-up rd's and Rabenseifner's limits are
                               * measured (rd_fit.c); 0 (off): the two limits above;
                               * 2 (auto, --rd-fit's default): on with --autotune on */
    size_t chunk_bytes;       /* bytes per ring chunk on the wire */
    int channels;             /* independent rings over disjoint parts of a buffer */
    int tcp_streams;          /* TCP connections per neighbour and channel */
    size_t tcp_sockbuf;       /* SO_SNDBUF/SO_RCVBUF bytes, 0 = kernel autotuning */
    double timeout_s;         /* longest wait without progress on data */
    double connect_timeout_s; /* longest wait for peers at start-up */
    int spin_us;              /* busy-poll this long before sleeping in poll() */
    int port_lo, port_hi;     /* port (range) for entries of peers without a port */
    char bind[RING_CONFIG_STR_MAX];   /* listen address or interface name; "" = own peers entry */
    char job_id[RING_CONFIG_STR_MAX]; /* peers of one job must agree on it */
    char secret_file[RING_CONFIG_STR_MAX]; /* the job's secret, in a file ("" = none) */
    char secret[RING_CONFIG_STR_MAX]; /* or as text (never printed) */
    ring_cfg_auth_t auth;     /* connect (default); frames: also a MAC on every frame;
                               * encrypt: also encrypted payloads */
    ring_cfg_log_t log_level; /* none (default), error, warn, info, debug or trace */
    double rate_limit_bps;    /* send cap per TCP connection, bytes/s; 0 = unlimited */
    char ib_dev[RING_CONFIG_STR_MAX]; /* verbs: RING_IB_HCA device list, "" = all */
    int gid_index;            /* verbs: GID table index, -1 = an IPv4-mapped RoCE v2 GID */
    int ib_timeout;           /* verbs: QP ACK timeout exponent (4.096 us x 2^N) */
    int ib_retry_count;       /* verbs: retransmissions before a write fails */
    char rendezvous[RING_CONFIG_STR_MAX]; /* "tcp://HOST:PORT", "file:///DIR" or "" (peers) */
    ring_cfg_order_t ring_order; /* host (default): peers of a host adjacent, or rank */
    char host_id[RING_CONFIG_STR_MAX]; /* groups peers for ring order instead of the host name */
    char iface[RING_CONFIG_STR_MAX]; /* RING_SOCKET_IFNAME: interfaces tcp may use */
    char timeline[RING_CONFIG_STR_MAX]; /* trace-event JSON file, {rank} replaced; "" = off */
    int timeline_max_events;  /* the timeline stops after this many events */
    int autotune;             /* 1: time chunk sizes x channels at start-up, keep the best;
                               * default 0 */
    char autotune_chunks[RING_CONFIG_STR_MAX];   /* "64K,256K,1M" */
    char autotune_channels[RING_CONFIG_STR_MAX]; /* "1,2,4" */
    size_t autotune_bytes;    /* buffer size of each timed allreduce */
    ring_launch_t launch;     /* what ring_config_load_env found in the launcher's variables */
    /* Where each table entry's value came from, indexed like the table. */
    unsigned char source[64];
} ring_config_t;

/* Fill cfg with the defaults. Never fails; cfg must be released with ring_config_free. */
RING_API
void ring_config_init(ring_config_t *cfg);

/*
 * A config on the heap, filled with the defaults (NULL when out of memory),
 * and its release (contents and struct; accepts NULL). For bindings, so that
 * none hard-codes sizeof(ring_config_t); read and write it by name with
 * ring_config_set and ring_config_get. (ring_config_free below releases only
 * the contents of a config the caller owns, hence the other name.)
 */
RING_API
ring_config_t *ring_config_new(void);
RING_API
void ring_config_delete(ring_config_t *cfg);

/*
 * The effective value of setting name as text, as --print-config shows it
 * ("fp16", "1048576", "30"), into buf: a choice as its word ("fp16" for
 * RING_CFG_CODEC_FP16), an on/off setting as "on" or "off".
 * RING_ERR_UNSUPPORTED for an unknown name, RING_ERR_INVALID when buf is too
 * small.
 */
RING_API
ring_status_t ring_config_get(const ring_config_t *cfg, const char *name, char *buf, size_t len);

/* Release what the config owns (the peers string). cfg may be reused after ring_config_init. */
RING_API
void ring_config_free(ring_config_t *cfg);

/* Copy src into dst (dst must be uninitialised or freed). */
RING_API
ring_status_t ring_config_copy(ring_config_t *dst, const ring_config_t *src);

/*
 * Set one setting by its name (e.g. "chunk-size", with or without leading
 * "--") from text, as the user typed it ("4M", "30s", "2"). Returns
 * RING_ERR_INVALID with a message naming the setting and the expected form,
 * or RING_ERR_UNSUPPORTED when the name is not a setting of this table.
 */
RING_API
ring_status_t ring_config_set(ring_config_t *cfg, const char *name, const char *value,
                              ring_config_source_t source);

/*
 * Read every RING_* variable of the table from the environment (programs
 * call ring_config_check_env to warn about unknown ones), then what a
 * launcher says (rank, world size, rendezvous, job id: ringd/launch.h,
 * kept in cfg->launch) for the settings no RING_* variable gave.
 * RING_DEBUG=1 is a shorthand for RING_LOG_LEVEL=debug.
 */
RING_API
ring_status_t ring_config_load_env(ring_config_t *cfg);

/*
 * Count the RING_* variables in the environment that no part of ringd reads
 * (typos, usually) and, when out is not NULL, print a warning for each.
 */
RING_API
int ring_config_check_env(FILE *out);

/* 1 when the library reads the environment variable var[0..len) (len: its name's
 * length, so "NAME=value" strings can be passed as they are), else 0. Programs
 * with RING_* variables of their own check the rest themselves. */
RING_API
int ring_config_env_known(const char *var, size_t len);

/* "Did you mean": the ring setting closest to word, a mistyped flag ("--chunk",
 * dashes and "=value" ignored) or RING_* variable: 1 with the flag (with its
 * dashes) or the variable in buf, or 0 when none is close enough to be a typo
 * of it. Programs with flags of their own compare those themselves. */
RING_API
int ring_config_suggest(const char *word, char *buf, size_t len);

/*
 * Consume argv[*i] (and its value, "--name VALUE" or "--name=VALUE") when it
 * is a flag of the table, advancing *i past what was used. Returns
 * RING_ERR_UNSUPPORTED without touching *i when argv[*i] is not one of ours.
 */
RING_API
ring_status_t ring_config_parse_arg(ring_config_t *cfg, int argc, char **argv, int *i);

/* Check that the settings make sense together: rank < world size, a peer list
 * that parses with one entry per rank, sane chunk size and timeouts. */
RING_API
ring_status_t ring_config_validate(const ring_config_t *cfg);

/* Print every setting as "  --flag VALUE  (RING_ENV, default D) doc" lines for --help. */
RING_API
void ring_config_print_help(FILE *out);

/* The same, with cfg's values as the defaults of the settings it has not been told
 * (source RING_SRC_DEFAULT): a program that sets defaults of its own (ringd trains
 * with fp16) shows them in its --help. */
RING_API
void ring_config_print_help_from(const ring_config_t *cfg, FILE *out);

/* Print the effective value of every setting and where it came from. */
RING_API
void ring_config_print(const ring_config_t *cfg, FILE *out);

/* Where the value of setting name came from (RING_SRC_DEFAULT for an unknown name). */
RING_API
ring_config_source_t ring_config_source(const ring_config_t *cfg, const char *name);

/* 1 when the peers meet through cfg->rendezvous, 0 when through the static
 * peer list: a peer list given by the user beats a launcher's rendezvous. */
RING_API
int ring_config_uses_rendezvous(const ring_config_t *cfg);

#ifdef __cplusplus
}
#endif
#endif /* RINGD_CONFIG_H */

/* launch-opts.h - ring-launch's command line (launch-opts.c). */
#ifndef RING_LAUNCH_OPTS_H
#define RING_LAUNCH_OPTS_H

#ifdef PACKAGE_VERSION
#define LAUNCH_VERSION PACKAGE_VERSION  /* follow configure.ac when built */
#else
#define LAUNCH_VERSION "0.1.0"
#endif
#define LAUNCH_MAX_RANKS 1024

struct launch_opts {
    long n, base_port;            /* ranks on this node; base_port 0 = probe free ports */
    double grace, timeout;        /* seconds; timeout 0 = none */
    long max_restarts;            /* restart every rank after a failure, up to this often;
                                   * with --elastic: start a replacement for a lost rank,
                                   * up to this many in all */
    long elastic_min, elastic_max;/* --elastic MIN:MAX; 0 and 0 when off */
    char *elastic_store;          /* tcp://HOST:PORT of the store ring-launch serves for
                                   * --elastic without --rendezvous (malloc), or NULL */
    const char *serve_store;      /* --serve-store tcp://HOST:PORT: serve only that */
    const char *job_id;           /* --job-id (with --serve-store), or NULL */
    const char *secret_file;      /* --secret-file (with --serve-store), or NULL */
    const char *host;
    int host_given;               /* --host: with a rendezvous, RING_BIND of the ranks */
    long nnodes, node_rank;       /* torchrun-style: this node's ranks are node_rank*n + 0..n-1;
                                   * 0 and -1 until given (launch_nodes_check settles them) */
    long nproc_per_node;          /* --nproc-per-node: becomes n */
    const char *rendezvous;       /* --rendezvous URL: ranks meet there, not by RING_PEERS */
    int tty;                      /* 0: --no-tty (rank 0's stdout stays a pipe) */
    const char **hosts;           /* --hosts: rank r listens on hosts[r % nhosts] (malloc) */
    char *hosts_text;             /* the list, cut up in place (malloc) */
    long nhosts;                  /* 0: every rank on host */
    const char *exec_prefix;      /* --exec-prefix: words before PROGRAM, or NULL */
    int prefix;
    const char *timeline;         /* --timeline FILE, or NULL */
    char *timeline_parts;         /* FILE.{rank}.part: RING_TIMELINE of the ranks */
    char **merge;                 /* --merge-timeline OUT IN...: NULL-terminated */
    char **argv;                  /* PROGRAM and its arguments */
    int bind_core;                /* --bind-to core: rank i on cpus[i] */
    int cpus[LAUNCH_MAX_RANKS];   /* ... the launcher's CPUs, in order */
    int ncpus;
};

/* "ring-launch: MESSAGE", the usage, and exit 2. */
void launch_usage_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Parse argv into o; prints help or version and exits 0, or a usage error and exits 2. */
void launch_opts_parse(int argc, char **argv, struct launch_opts *o);

#endif /* RING_LAUNCH_OPTS_H */

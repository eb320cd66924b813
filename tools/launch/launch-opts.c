/* launch-opts.c - ring-launch's command line: usage, help and parsing. */
#ifdef HAVE_CONFIG_H
#include "ring_build.h"
#endif
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launch-nodes.h"
#include "launch-opts.h"
#include "launch-ranks.h"

static const char launch_usage_text[] =
    "usage: ring-launch -n N [--host ADDR | --hosts ADDR,...] [--base-port P]\n"
    "                   [--exec-prefix 'CMD ...'] [--grace SECS]\n"
    "                   [--timeout SECS] [--max-restarts K] [--bind-to core|none]\n"
    "                   [--no-prefix] [--no-tty] [--timeline FILE] [--rendezvous URL]\n"
    "                   -- PROGRAM [ARGS...]\n"
    "       ring-launch --nnodes N --node-rank R --nproc-per-node P\n"
    "                   --rendezvous tcp://HOST:PORT [OPTIONS] -- PROGRAM [ARGS...]\n"
    "       ring-launch --elastic MIN:MAX [--max-restarts K] -n N [OPTIONS]\n"
    "                   -- PROGRAM [ARGS...]\n"
    "       ring-launch --serve-store tcp://HOST:PORT [--job-id ID]\n"
    "                   [--secret-file FILE] [-n N] [--timeout SECS]\n"
    "       ring-launch --merge-timeline OUT IN...\n"
    "       ring-launch --help | --version\n";

static const char launch_help_text[] =
    "\nStart N copies of PROGRAM as the ranks of one ring: on this host, or each\n"
    "through a command of its own (--exec-prefix: a network namespace, a\n"
    "container, ssh) on the address --hosts gives it. Across nodes, as torchrun,\n"
    "each node runs one ring-launch with the same --nnodes, --nproc-per-node and\n"
    "rendezvous, and its own --node-rank.\n"
    "\nOPTIONS\n"
    "  -n N            number of ranks, 1..1024 (required unless\n"
    "                  --nproc-per-node)\n"
    "  --nproc-per-node P\n"
    "                  ranks on this node, 1..1024; alone, the same as -n P\n"
    "  --nnodes N      nodes of the job, each running one ring-launch with the\n"
    "                  same --nnodes, --nproc-per-node and --rendezvous: N x P\n"
    "                  ranks in all (needs --rendezvous and --node-rank)\n"
    "  --node-rank R   this node's index, 0..N-1: its ranks are R x P .. R x P +\n"
    "                  P-1 (RING_LOCAL_RANK 0..P-1). Node 0 runs rank 0, which\n"
    "                  serves the rendezvous store\n"
    "  --rendezvous tcp://HOST:PORT\n"
    "                  the ranks meet at a store instead of a peer list (as\n"
    "                  RING_RENDEZVOUS): rank 0 serves it on PORT of HOST, so\n"
    "                  HOST is node 0's address, reachable from every node;\n"
    "                  file:///DIR meets in a directory every node sees. Each\n"
    "                  rank listens on --host if given, else where libringd\n"
    "                  puts it: the first interface but lo and docker*\n"
    "                  (--iface/RING_SOCKET_IFNAME choose another), or\n"
    "                  127.0.0.1 when HOST is loopback; on a port of its own\n"
    "                  (--base-port: P + local rank). Across nodes ring-launch\n"
    "                  makes no secret (it could not share it): give every node\n"
    "                  the same RING_SECRET_FILE\n"
    "  --host ADDR     numeric IPv4 or IPv6 address the ranks listen on;\n"
    "                  free ports are probed on it (default 127.0.0.1; with\n"
    "                  --rendezvous: given to the ranks as RING_BIND)\n"
    "  --base-port P   use ports P..P+N-1 instead of probing free ones\n"
    "                  (default: probe; with --hosts, 29500). A port already\n"
    "                  in use here is an error before any rank starts\n"
    "  --hosts ADDR,...\n"
    "                  numeric addresses the ranks listen on instead of --host:\n"
    "                  rank r on entry r mod K, port --base-port + r (no\n"
    "                  probing: the ranks may live in other network namespaces);\n"
    "                  RING_LOCAL_RANK counts the ranks of each address\n"
    "  --exec-prefix 'CMD ...'\n"
    "                  run each rank as CMD ... PROGRAM [ARGS...]: the words\n"
    "                  split on blanks (no shell); in them {rank} is the rank,\n"
    "                  {node} the index of its --hosts entry (else --node-rank) and\n"
    "                  {host} its address. E.g. with tools/lab/netns-lab.sh:\n"
    "                  --exec-prefix 'netns-lab.sh exec LAB {node} --'. The\n"
    "                  supervision is the same: the first rank that fails\n"
    "                  stops the others\n"
    "  --grace SECS    after SIGTERM, wait SECS before SIGKILL (default 5); a\n"
    "                  rank stopped by a signal gets SIGKILL at once\n"
    "  --timeout SECS  kill the whole job after SECS; 0 = never (default 0)\n"
    "  --max-restarts K\n"
    "                  when a rank fails, stop the others and start every rank\n"
    "                  again, up to K times (torchrun's --max-restarts; default\n"
    "                  0). ringd with --checkpoint-dir resumes from its newest\n"
    "                  valid checkpoint. Not after --timeout or a signal to the\n"
    "                  launcher. With --elastic: start a replacement for a lost\n"
    "                  rank instead, up to K in all (ELASTIC JOBS below)\n"
    "  --elastic MIN:MAX\n"
    "                  an elastic job (torchrun's notation): a rank that dies\n"
    "                  does not stop the others, which go on without it while\n"
    "                  at least MIN are left (libringd shrinks their ring:\n"
    "                  ring_comm_shrink, ringd --elastic), and a replacement\n"
    "                  (--max-restarts) joins the running ring. The ranks meet\n"
    "                  at a rendezvous store that ring-launch serves itself, so\n"
    "                  that it outlives every rank: on --host (default\n"
    "                  127.0.0.1) and a free port, or at --rendezvous\n"
    "                  tcp://HOST:PORT (across nodes, node 0's ring-launch\n"
    "                  serves it); file:///DIR needs no server, but --host\n"
    "                  (where a joiner listens). 1 <= MIN <= MAX <= 65535, and\n"
    "                  the job's ranks (-n, or --nnodes x --nproc-per-node)\n"
    "                  within MIN..MAX. Not with --hosts: a fixed peer list has\n"
    "                  no store to join through\n"
    "  --serve-store tcp://HOST:PORT\n"
    "                  serve only the rendezvous store of an elastic job, with\n"
    "                  no PROGRAM, until SIGINT or SIGTERM (exit 0) or --timeout\n"
    "                  (exit 124): for ranks that another launcher starts (srun\n"
    "                  steps, Kubernetes pods) with RING_RENDEZVOUS=tcp://HOST:PORT,\n"
    "                  RING_ELASTIC=on and the same RING_JOB_ID and secret, so\n"
    "                  that a replacement can join after any rank is lost, rank\n"
    "                  0 too. HOST is an address of this host, or a name\n"
    "                  (then every address: a Service's name in a pod)\n"
    "  --job-id ID     with --serve-store: the ranks' RING_JOB_ID (default\n"
    "                  $RING_JOB_ID; one of the two is needed)\n"
    "  --secret-file FILE\n"
    "                  with --serve-store: the ranks' secret (default\n"
    "                  $RING_SECRET_FILE, else $RING_SECRET; without one the\n"
    "                  store admits anyone who reaches it, and says so). With\n"
    "                  --serve-store, -n N is the most ranks of the job: the\n"
    "                  store holds room for 4 x N peers (default 16)\n"
    "  --bind-to core|none\n"
    "                  core: pin this node's rank i to the i-th CPU ringd may\n"
    "                  use (its affinity mask), as mpirun does for up to one\n"
    "                  rank per core; with more ranks than CPUs nothing is\n"
    "                  pinned (a warning). Pinned, a rank's threads (BLAS,\n"
    "                  ringd's engine thread) share its one core. Default none\n"
    "  --no-prefix     relay output without the \"[RANK] \" line prefix\n"
    "  --no-tty        keep rank 0's stdout a pipe even when ring-launch's is a\n"
    "                  terminal (by default rank 0 then writes to a\n"
    "                  pseudo-terminal, so that ringd's --progress auto draws\n"
    "                  its bar, and the prefix is put back after each redraw)\n"
    "  --timeline FILE\n"
    "                  give every rank RING_TIMELINE=FILE.{rank}.part, so that\n"
    "                  programs built on libringd (ring-bench, ringd) write a\n"
    "                  Chrome trace-event timeline of their allreduces; once\n"
    "                  the ranks have exited (also after a failure) merge the\n"
    "                  parts into FILE and delete them. Open FILE in\n"
    "                  chrome://tracing or ui.perfetto.dev: one process per\n"
    "                  rank, one thread per channel. Timestamps are moved so\n"
    "                  that the job's first event is at 0; ranks share the\n"
    "                  monotonic clock of this host, so they line up\n"
    "  --merge-timeline OUT IN...\n"
    "                  merge timeline files (written with --timeline FILE\n"
    "                  and {rank} in FILE, e.g. by srun or mpirun ranks) into\n"
    "                  OUT, as --timeline does, and exit. The ranks of other\n"
    "                  hosts keep their own clocks: no offset is applied\n"
    "  -h, --help      show this help and exit\n"
    "  --version       show the version and exit\n"
    "  Value options also accept --opt=VALUE; SECS may be fractional.\n"
    "\nENVIRONMENT SET FOR EACH RANK\n"
    "  RING_RANK        rank of this process, 0..N-1 (across nodes: R x P + i)\n"
    "  RING_WORLD_SIZE  N (across nodes: --nnodes x --nproc-per-node)\n"
    "  RING_LOCAL_RANK  same as RING_RANK (all ranks are local); with\n"
    "                   --hosts, the rank's index among its address's ranks;\n"
    "                   across nodes, its index on this node\n"
    "  RING_PEERS       comma-separated HOST:PORT of every rank in rank\n"
    "                   order, e.g. 127.0.0.1:4000,127.0.0.1:4001;\n"
    "                   IPv6 hosts are bracketed: [::1]:4000 (not with\n"
    "                   --rendezvous, which removes a RING_PEERS of the caller's)\n"
    "  RING_RENDEZVOUS  --rendezvous's URL; RING_BIND --host; RING_PORT --base-port\n"
    "                   + the local rank (only with --rendezvous or --elastic)\n"
    "  RING_TIMELINE    FILE.{rank}.part, with --timeline FILE\n"
    "  RING_ELASTIC, RINGD_ELASTIC\n"
    "                   with --elastic MIN:MAX: RING_ELASTIC=on (libringd keeps\n"
    "                   the store and admits joiners) and RINGD_ELASTIC=MIN:MAX\n"
    "                   (ringd's --elastic), so that PROGRAM ringd needs no flag;\n"
    "                   RING_RENDEZVOUS the store's URL (no RING_PEERS) and\n"
    "                   RING_JOB_ID the job id it serves (the caller's when set)\n"
    "  RING_SECRET_FILE\n"
    "                   a file holding a fresh random secret for this run, so\n"
    "                   that the ranks' connections are authenticated: mode\n"
    "                   0600, in a directory of its own (mode 0700) in\n"
    "                   /dev/shm, else $TMPDIR or /tmp, removed when the job\n"
    "                   ends, also on a signal that ends ring-launch (not on\n"
    "                   SIGKILL). Not RING_SECRET: a process's environment can\n"
    "                   be read by the user's other processes. A RING_SECRET or\n"
    "                   RING_SECRET_FILE set already is kept, and no file\n"
    "                   made; across nodes none is made (give every node the\n"
    "                   same RING_SECRET_FILE)\n"
    "  RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK\n"
    "                   torchrun's names: RANK = RING_RANK, WORLD_SIZE =\n"
    "                   RING_WORLD_SIZE, LOCAL_RANK = RING_LOCAL_RANK,\n"
    "                   LOCAL_WORLD_SIZE the ranks of its host (with --hosts,\n"
    "                   of its address), GROUP_RANK its node (--node-rank; with\n"
    "                   --hosts, its address's index), so that\n"
    "                   torch.distributed's env:// works as under torchrun:\n"
    "                   init_process_group(\"gloo\" or \"ringd\")\n"
    "  MASTER_ADDR, MASTER_PORT\n"
    "                   where rank 0 serves torch.distributed's store. On one\n"
    "                   host: --host (with --hosts, rank 0's address) and a\n"
    "                   free port that is none of the ranks' (with --base-port\n"
    "                   P: P+N if free; with --hosts: P+N). With --rendezvous\n"
    "                   tcp://HOST:PORT: HOST (node 0's) and PORT+1, the same\n"
    "                   on every node; with file:///DIR across nodes: neither.\n"
    "                   They change nothing in how libringd's ranks meet:\n"
    "                   RING_PEERS and RING_RENDEZVOUS beat MASTER_ADDR.\n"
    "                   Of these seven, one the caller set (not empty) is\n"
    "                   kept, quietly; a kept RANK or LOCAL_RANK with several\n"
    "                   ranks, or a WORLD_SIZE not the job's, gets a note\n"
    "  OMP_NUM_THREADS, OPENBLAS_NUM_THREADS\n"
    "                   with 2 or more ranks on this node, each unset one is\n"
    "                   set to this node's CPUs / ranks (at least 1), as\n"
    "                   torchrun does, and a line says so when both are:\n"
    "                   ranks that each start a thread per CPU oversubscribe\n"
    "                   the cores, and idle OpenBLAS threads spin\n"
    "  OPENBLAS_CORETYPE\n"
    "                   when unset and this node's OpenBLAS does not know its\n"
    "                   CPU (it then runs generic SSE3 kernels, several\n"
    "                   times slower: Debian 12's OpenBLAS on an Emerald\n"
    "                   Rapids Xeon), the kernel set the CPU can run\n"
    "                   (Haswell, SkylakeX or Cooperlake), and a line says so;\n"
    "                   with --exec-prefix (the ranks may run on other\n"
    "                   machines) only the line, as advice\n"
    "\nBEHAVIOUR\n"
    "  Each rank runs in its own process group with stdin from /dev/null.\n"
    "  Its stdout and stderr are relayed line by line to the launcher's\n"
    "  stdout and stderr, prefixed \"[RANK] \". When a rank exits non-zero\n"
    "  or is killed, the others get SIGTERM, then SIGKILL after the grace\n"
    "  period (with --elastic: ELASTIC JOBS). A rank stopped by a signal\n"
    "  (SIGSTOP: state T in /proc, for any process of its group) cannot\n"
    "  act on SIGTERM: it gets SIGKILL at once, and is named as the likely\n"
    "  cause, since its peers time out on it and the first rank to fail is\n"
    "  one of them. SIGINT and SIGTERM sent to the launcher are forwarded\n"
    "  to every rank, and the launcher exits once all ranks are gone, with\n"
    "  their status: 0 when every rank stopped cleanly (ringd finishes its\n"
    "  step, checkpoints and exits 0), 128+SIG when one died of the signal.\n"
    "  Across nodes each ring-launch supervises its own ranks; the other\n"
    "  nodes' ranks fail within their --timeout, naming the lost peer.\n"
    "\nELASTIC JOBS\n"
    "  With --elastic MIN:MAX a rank that exits non-zero or is killed while\n"
    "  no rank has finished yet is lost: a line says so (\"rank 2 (pid 4242)\n"
    "  lost: killed by signal 9 (Killed); 3 ranks still running\"), nobody\n"
    "  is stopped, and while --max-restarts K allows (K replacements in all)\n"
    "  a replacement starts in its place with its environment (the same\n"
    "  RING_RANK; a line says so) and joins the ring at its next grow\n"
    "  (ring_comm_grow; ringd: a step boundary). Its output is prefixed\n"
    "  \"[2 r1] \" (rank 2's first replacement). When fewer than MIN ranks\n"
    "  are left and no replacement may start, the others are stopped as\n"
    "  without --elastic and the job fails, naming MIN. A rank stopped by a\n"
    "  signal (SIGSTOP) is not replaced: its peers time out on it and go\n"
    "  on; once every other rank has exited it gets SIGKILL and counts as\n"
    "  lost. A replacement alone left running --grace (at least 1 s) after\n"
    "  the others finished came too late to join (in lockstep the members\n"
    "  finish together): it is stopped and counts as lost. The job ends\n"
    "  when every rank has exited. A rank that fails after another exited\n"
    "  0 is not lost but failed, as without --elastic.\n"
    "  Across nodes each ring-launch counts its own ranks (MIN is for the\n"
    "  ranks, ringd --elastic, to enforce). --timeout and signals to the\n"
    "  launcher end every rank as without --elastic. A replacement writes\n"
    "  the --timeline part of the rank it replaces.\n"
    "\nEXIT STATUS\n"
    "  0        every rank exited 0, also when they stopped after SIGINT or\n"
    "           SIGTERM to the launcher (as srun: the status is the ranks')\n"
    "  N        the first rank that failed exited with status N, or was\n"
    "           killed by signal SIG (N = 128+SIG); a rank that cannot\n"
    "           execute PROGRAM exits 127\n"
    "  1        the launcher itself failed (ports, pipes, fork, the store);\n"
    "           with --elastic: fewer than MIN ranks exited 0\n"
    "  2        bad usage\n"
    "  124      --timeout expired\n"
    "  With --elastic, 0 when at least MIN ranks exited 0 and no rank failed\n"
    "  after the first had finished, however many were lost; when too few\n"
    "  were left, the status of the rank whose loss left them (137: SIGKILL)\n"
    "\nEXAMPLES\n"
    "  ring-launch -n 4 -- ring-bench -b 1M -e 1M\n"
    "  ring-launch -n 2 --host ::1 --timeout 60 -- ./ring-test\n"
    "  ring-launch -n 3 --base-port 9000 -- sh -c 'echo $RING_PEERS'\n"
    "  ring-launch -n 2 -- python3 train.py   (init_process_group(\"gloo\"))\n"
    "  ring-launch -n 4 --timeline trace.json -- ring-bench -e 64M\n"
    "  ring-launch -n 4 --elastic 2:4 --max-restarts 1 -- ringd --workload fmnist-mlp\n"
    "  ring-launch --serve-store tcp://10.0.0.1:29400 --job-id train1 -n 4\n"
    "  ring-launch --nnodes 2 --node-rank 0 --nproc-per-node 4 \\\n"
    "      --rendezvous tcp://10.0.0.1:29400 -- ringd --workload fmnist-mlp\n"
    "      (and --node-rank 1 on the second node)\n"
    "  ring-launch -n 4 --hosts 198.18.0.2,198.18.0.6,198.18.0.10,198.18.0.14 \\\n"
    "      --exec-prefix 'tools/lab/netns-lab.sh exec lab1 {node} --' -- ring-bench -e 64M\n";

void launch_usage_die(const char *fmt, ...)
{
    va_list ap;
    fputs("ring-launch: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n%sTry 'ring-launch --help' for more.\n",
            launch_usage_text);
    exit(2);
}

static double launch_num_parse(const char *s, const char *name, double lo,
                               double hi, int integral)
{
    char *end;
    double v;
    errno = 0;
    v = integral ? (double)strtol(s, &end, 10) : strtod(s, &end);
    /* v != v rejects the NaN that strtod accepts */
    if (*s == '\0' || *end != '\0' || errno != 0 || v != v || v < lo || v > hi)
        launch_usage_die("invalid value '%s' for %s (expected %s %g..%g)", s,
                         name, integral ? "an integer" : "a number", lo, hi);
    return v;
}

/* Returns the value if argv[*i] is NAME VALUE, --NAME=VALUE or -nVALUE. */
static const char *launch_opt_take(int argc, char **argv, int *i,
                                    const char *name)
{
    const char *a = argv[*i];
    size_t len = strlen(name);
    if (strcmp(a, name) == 0) {
        if (*i + 1 >= argc)
            launch_usage_die("option '%s' needs a value", name);
        return argv[++*i];
    }
    if (strncmp(a, name, len) != 0)
        return NULL;
    if (name[1] == '-')
        return a[len] == '=' ? a + len + 1 : NULL;
    return a + len;
}

static void launch_cpus_find(struct launch_opts *o);

#define LAUNCH_ELASTIC_MAX 65535    /* as ringd's --elastic and libringd's ranks */

/* --elastic MIN:MAX (launch-elastic.c supervises such a job) */
static void launch_elastic_parse(struct launch_opts *o, const char *v)
{
    char *end;
    long lo, hi = 0;
    int bad;

    errno = 0;
    lo = strtol(v, &end, 10);
    bad = end == v || *end != ':' || end[1] == '\0';
    if (!bad) {
        const char *from = end + 1;

        hi = strtol(from, &end, 10);
        bad = end == from || *end != '\0';
    }
    if (bad || errno != 0)
        launch_usage_die("--elastic '%s': expected MIN:MAX, the fewest and the most ranks the "
                         "job may run with (torchrun's notation, e.g. --elastic 2:4)", v);
    if (lo < 1)
        launch_usage_die("--elastic %s: MIN must be at least 1 (a ring of one rank)", v);
    if (hi > LAUNCH_ELASTIC_MAX)
        launch_usage_die("--elastic %s: MAX must be at most %d", v, LAUNCH_ELASTIC_MAX);
    if (lo > hi)
        launch_usage_die("--elastic %s: MIN %ld is above MAX %ld", v, lo, hi);
    o->elastic_min = lo;
    o->elastic_max = hi;
}

static void launch_elastic_check(const struct launch_opts *o)
{
    long world = launch_world_size(o);

    if (o->job_id || o->secret_file)
        launch_usage_die("--job-id and --secret-file go with --serve-store; the ranks read "
                         "RING_JOB_ID and RING_SECRET_FILE from the environment");
    if (!o->elastic_min)
        return;
    if (o->nhosts > 0)
        launch_usage_die("--elastic needs a rendezvous store, where a replacement joins the "
                         "ring, and --hosts gives the ranks a fixed peer list instead (ranks "
                         "in other network namespaces could not reach a store on this host): "
                         "leave --hosts out (--host ADDR says where the ranks and the store "
                         "listen)");
    if (o->rendezvous && strncmp(o->rendezvous, "file://", 7) == 0 && !o->host_given)
        launch_usage_die("--elastic with --rendezvous %s: give --host ADDR too, where the ranks "
                         "listen (their RING_BIND): a replacement that joins through a file "
                         "store must say where it listens", o->rendezvous);
    if (world < o->elastic_min || world > o->elastic_max)
        launch_usage_die("--elastic %ld:%ld: the job starts %ld rank%s (%s), outside MIN..MAX: "
                         "give %s between %ld and %ld", o->elastic_min, o->elastic_max, world,
                         world == 1 ? "" : "s", o->nnodes > 1 ? "--nnodes x --nproc-per-node"
                                                              : "-n",
                         o->nnodes > 1 ? "a world" : "-n", o->elastic_min, o->elastic_max);
}

static int launch_serve_check(const struct launch_opts *o)
{
    struct launch_rdzv rv;
    char why[400];

    if (!o->serve_store)
        return 0;
    if (o->argv)
        launch_usage_die("--serve-store serves the store alone and runs no PROGRAM: start the "
                         "ranks elsewhere (srun, pods) with RING_RENDEZVOUS=%s",
                         o->serve_store);
    if (o->elastic_min || o->rendezvous || o->nnodes || o->nproc_per_node || o->nhosts ||
        o->exec_prefix || o->timeline)
        launch_usage_die("--serve-store takes -n, --job-id, --secret-file and --timeout only");
    if (launch_rdzv_parse(o->serve_store, &rv, why, sizeof(why)) != 0 || rv.port == 0)
        launch_usage_die("--serve-store '%s': expected tcp://HOST:PORT, where the ranks' "
                         "RING_RENDEZVOUS points (a file:/// store needs no server)",
                         o->serve_store);
    return 1;
}


void launch_opts_parse(int argc, char **argv, struct launch_opts *o)
{
    const char *v;
    int i;
    *o = (struct launch_opts){ .host = "127.0.0.1", .grace = 5, .prefix = 1, .tty = 1,
                               .node_rank = -1 };
    for (i = 1; i < argc && !o->argv; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            o->argv = argv + i + 1;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            printf("%s%s", launch_usage_text, launch_help_text);
            exit(0);
        } else if (strcmp(a, "--version") == 0) {
            printf("ring-launch (ringd) %s\n", LAUNCH_VERSION);
            exit(0);
        } else if (strcmp(a, "--no-prefix") == 0) {
            o->prefix = 0;
        } else if (strcmp(a, "--no-tty") == 0) {
            o->tty = 0;
        } else if (strcmp(a, "--merge-timeline") == 0) {
            if (i != 1 || argc < 4)
                launch_usage_die("--merge-timeline OUT IN... takes the whole command line");
            o->merge = argv + 2;
            return;
        } else if ((v = launch_opt_take(argc, argv, &i, "--timeline"))) {
            if (*v == '\0' || strstr(v, "{rank}") != NULL)
                launch_usage_die("--timeline FILE names the merged file: not empty, no "
                                 "{rank} in it");
            o->timeline = v;
        } else if ((v = launch_opt_take(argc, argv, &i, "-n"))) {
            o->n = (long)launch_num_parse(v, "-n", 1, LAUNCH_MAX_RANKS, 1);
        } else if ((v = launch_opt_take(argc, argv, &i, "--nproc-per-node"))) {
            o->nproc_per_node = (long)launch_num_parse(v, "--nproc-per-node", 1,
                                                       LAUNCH_MAX_RANKS, 1);
        } else if ((v = launch_opt_take(argc, argv, &i, "--nnodes"))) {
            o->nnodes = (long)launch_num_parse(v, "--nnodes", 1, LAUNCH_MAX_RANKS, 1);
        } else if ((v = launch_opt_take(argc, argv, &i, "--node-rank"))) {
            o->node_rank = (long)launch_num_parse(v, "--node-rank", 0, LAUNCH_MAX_RANKS - 1, 1);
        } else if ((v = launch_opt_take(argc, argv, &i, "--rendezvous"))) {
            o->rendezvous = v;
        } else if ((v = launch_opt_take(argc, argv, &i, "--elastic"))) {
            launch_elastic_parse(o, v);
        } else if ((v = launch_opt_take(argc, argv, &i, "--serve-store"))) {
            o->serve_store = v;
        } else if ((v = launch_opt_take(argc, argv, &i, "--job-id"))) {
            if (*v == '\0')
                launch_usage_die("--job-id needs the ranks' job id (RING_JOB_ID), not ''");
            o->job_id = v;
        } else if ((v = launch_opt_take(argc, argv, &i, "--secret-file"))) {
            o->secret_file = v;
        } else if ((v = launch_opt_take(argc, argv, &i, "--hosts"))) {
            char why[256];
            if (launch_hosts_parse(o, v, why, sizeof(why)) != 0)
                launch_usage_die("%s", why);
        } else if ((v = launch_opt_take(argc, argv, &i, "--host"))) {
            o->host = v;
            o->host_given = 1;
        } else if ((v = launch_opt_take(argc, argv, &i, "--bind-to"))) {
            if (strcmp(v, "core") != 0 && strcmp(v, "none") != 0)
                launch_usage_die("--bind-to takes core or none, not '%s'", v);
            o->bind_core = strcmp(v, "core") == 0;
        } else if ((v = launch_opt_take(argc, argv, &i, "--exec-prefix"))) {
            if (strspn(v, " \t") == strlen(v))
                launch_usage_die("--exec-prefix needs a command (e.g. 'netns-lab.sh exec LAB "
                                 "{rank} --')");
            o->exec_prefix = v;
        } else if ((v = launch_opt_take(argc, argv, &i, "--base-port"))) {
            o->base_port = (long)launch_num_parse(v, "--base-port", 1,
                                                  65535, 1);
        } else if ((v = launch_opt_take(argc, argv, &i, "--grace"))) {
            o->grace = launch_num_parse(v, "--grace", 0, 86400, 0);
        } else if ((v = launch_opt_take(argc, argv, &i, "--max-restarts"))) {
            o->max_restarts = (long)launch_num_parse(v, "--max-restarts", 0, 1000, 1);
        } else if ((v = launch_opt_take(argc, argv, &i, "--timeout"))) {
            o->timeout = launch_num_parse(v, "--timeout", 0, 31536000, 0);
        } else {
            launch_usage_die(a[0] == '-' ? "unknown option '%s'"
                             : "missing '--' before PROGRAM '%s'", a);
        }
    }
    if (launch_serve_check(o))
        return;     /* --serve-store: none of the rest applies */
    {
        char why[512];

        if (launch_nodes_check(o, why, sizeof(why)) != 0)
            launch_usage_die("%s", why);
    }
    launch_elastic_check(o);
    if (!o->argv || !o->argv[0])
        launch_usage_die(o->argv ? "missing PROGRAM after '--'"
                         : "missing '--' followed by PROGRAM");
    if (o->host_given && o->nhosts > 0)
        launch_usage_die("--host and --hosts: give one (--hosts is an address per rank)");
    if (o->nhosts > 0 && !o->base_port)
        o->base_port = 29500; /* nothing to probe in another namespace */
    if (o->base_port && o->base_port + o->n - 1 > 65535)
        launch_usage_die("--base-port %ld + %ld ranks exceeds port 65535",
                         o->base_port, o->n);
    if (o->bind_core)
        launch_cpus_find(o);
}

/* --bind-to core: the CPUs this launcher may use, in order; with more ranks than
 * CPUs, none (mpirun does not bind an oversubscribed node either). */
static void launch_cpus_find(struct launch_opts *o)
{
    cpu_set_t set;

    o->ncpus = 0;
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        for (int c = 0; c < CPU_SETSIZE && o->ncpus < LAUNCH_MAX_RANKS; c++)
            if (CPU_ISSET(c, &set))
                o->cpus[o->ncpus++] = c;
    if (o->ncpus == 0) {
        fprintf(stderr, "ring-launch: --bind-to core: cannot read this process's CPUs (%s); "
                "the ranks run unbound\n", strerror(errno));
        o->bind_core = 0;
    } else if (o->n > o->ncpus) {
        fprintf(stderr, "ring-launch: --bind-to core: %ld ranks on %d CPUs would share cores; "
                "the ranks run unbound (as mpirun on an oversubscribed node)\n", o->n,
                o->ncpus);
        o->bind_core = 0;
    }
}


/*
 * t-shm-handshake.c - the shared-memory transport's hand-shake and its
 * edges, through the ops table (helpers in shm_pair.h): requests posted
 * during the hand-shake wait for it, on shared memory and on the fall-back
 * to tcp (the connector's unix socket unreachable); a plain tcp peer on an
 * shm listener reads and writes as over tcp, every message whole; a hostile
 * acceptor that passes a blocking pipe for an eventfd cannot make wait()
 * block; an endpoint closed in the middle of its hand-over leaves no
 * descriptor behind; 64 and 100 connections opened at once all move to
 * shared memory; no wake-up is lost between processes, and a killed peer
 * fails the pending receive; no descriptor is left after fini.
 *
 * Every loop is bounded by a deadline (progress(), then wait(ms)).
 */
#include "ring_build.h"

#include "shm_pair.h"
#include "tap.h"

/* ---- requests posted during the hand-shake, and the fall-back to tcp ----------------- */

/* Connect and accept without waiting for the hand-shake; with no_unix, the connector's
 * unix socket is closed first, as if the acceptor were on another host: both ends must
 * stay tcp. Requests posted at once wait for the hand-shake, then go in order (an urgent
 * one first: none has begun). */
static void test_early(int no_unix)
{
    enum { M = 4 };
    static const size_t lens[M] = {10, 200000, 0, 33};
    const char *label = no_unix ? "fall-back to tcp" : "posted during the hand-shake";
    const ring_tp_ops_t *ops = ring_tp_find("shm");
    ring_tp_params_t params;
    ring_tp_t *tp = NULL;
    ring_tp_listener_t *l = NULL;
    ring_tp_ep_t *c = NULL, *a = NULL;
    unsigned char *sb[M], *rb[M], *back = xmalloc(5000), *back_in = xmalloc(5000);
    ring_tp_req_t s[M], r[M], bs, br, rx, *all[2 * M + 2], *one[1] = {&rx};
    unsigned char x[8];
    int want[M] = {3, 0, 1, 2}, good = 1, port, n = 0;
    double until = now_s() + 5;

    memset(&params, 0, sizeof(params));
    setenv("RING_SHM_BYTES", "64K", 1);
    if (ops->init(&params, &tp) != RING_OK || ops->listen(tp, "127.0.0.1", 0, &l) != RING_OK)
        bail("%s: %s", label, ring_last_error());
    port = ops->listener_port(l);
    if (ops->connect(tp, "127.0.0.1", port, &c) != RING_OK)
        bail("%s: connect: %s", label, ring_last_error());
    if (no_unix)
        shm_ux_close(c->tp); /* the acceptor cannot reach it: "another host" */
    for (int i = 0; i < M; i++) {
        sb[i] = xmalloc(lens[i]);
        rb[i] = xmalloc(200000);
        pat_fill(sb[i], lens[i], 80 + (uint32_t)i, 0);
        req_one(&s[i], sb[i], lens[i]);
        req_one(&r[i], rb[i], 200000);
        all[n++] = &s[i];
        all[n++] = &r[i];
    }
    s[3].urgent = 1;
    for (int i = 0; i < M; i++)
        ops->post_send(c, &s[i]);
    while (a == NULL && now_s() < until) {
        if (ops->accept(l, &a) != RING_OK)
            break;
        if (a == NULL)
            ops->wait(tp, 5);
    }
    if (a == NULL)
        bail("%s: nothing to accept", label);
    pat_fill(back, 5000, 90, 0);
    req_one(&bs, back, 5000);
    req_one(&br, back_in, 5000);
    ops->post_send(a, &bs);
    for (int i = 0; i < M; i++)
        ops->post_recv(a, &r[i]);
    ops->post_recv(c, &br);
    all[n++] = &bs;
    all[n++] = &br;
    ok(c->phase == SHM_OFFERING && a->phase == SHM_ANSWERING, "%s: requests posted while the "
       "hand-shake runs (connector offering, acceptor waiting for the offer)", label);
    ok(run_reqs(tp, ops, all, n, 10), "%s: all complete", label);
    for (int k = 0; k < M; k++) {
        int m = want[k];

        if (r[k].status != RING_OK || r[k].bytes != lens[m] ||
            pat_bad(rb[k], lens[m], 80 + (uint32_t)m, 0) >= 0) {
            diag("%s: receive %d: %s, %zu bytes, want message %d of %zu", label, k,
                 ring_status_str(r[k].status), r[k].bytes, m, lens[m]);
            good = 0;
        }
    }
    ok(good && br.status == RING_OK && br.bytes == 5000 && pat_bad(back_in, 5000, 90, 0) < 0,
       "%s: whole, in order (the urgent one first), intact, both ways", label);
    if (no_unix)
        ok(c->phase == SHM_TCP && a->phase == SHM_TCP, "%s: both ends stayed tcp (phases %d, %d)",
           label, (int)c->phase, (int)a->phase);
    else
        ok(c->phase == SHM_PIPES && a->phase == SHM_PIPES, "%s: both ends went to shared "
           "memory (phases %d, %d)", label, (int)c->phase, (int)a->phase);
    /* closing one end fails the other's pending receive, on tcp too (rx stays in scope
     * until the endpoint is closed: a receive that never completes is still queued) */
    req_one(&rx, x, sizeof(x));
    ops->post_recv(a, &rx);
    ops->ep_close(c);
    ok(run_reqs(tp, ops, one, 1, 3) && rx.status != RING_OK,
       "%s: the connector closes: the acceptor's pending receive fails", label);
    ops->ep_close(a);
    ops->listener_close(l);
    ops->fini(tp);
    unsetenv("RING_SHM_BYTES");
    for (int i = 0; i < M; i++) {
        free(sb[i]);
        free(rb[i]);
    }
    free(back);
    free(back_in);
}

/* ---- a tcp peer on an shm listener ------------------------------------------------------ */

/* A peer that runs plain tcp (a tcp ringd, or a stranger) connects to an shm listener: its
 * first message is no offer, so the connection is plain tcp and the caller reads that
 * message as if shm were not there: whole when the receive holds it, in order with the
 * next. first_len: the first message's size (more than the hand-shake's 128-byte buffer
 * too). */
static void test_tcp_peer(size_t first_len)
{
    const ring_tp_ops_t *sops = ring_tp_find("shm"), *tops = ring_tp_find("tcp");
    ring_tp_params_t params;
    ring_tp_t *stp = NULL, *ttp = NULL;
    ring_tp_listener_t *l = NULL;
    ring_tp_ep_t *c = NULL, *a = NULL;
    unsigned char *m1 = xmalloc(first_len), *m2 = xmalloc(300), *in1 = xmalloc(1000),
                  *in2 = xmalloc(1000), back[20], back_in[20];
    ring_tp_req_t s1, s2, r1, r2, bs, br;
    double until = now_s() + 5;
    int port, good;

    memset(&params, 0, sizeof(params));
    if (sops->init(&params, &stp) != RING_OK || tops->init(&params, &ttp) != RING_OK ||
        sops->listen(stp, "127.0.0.1", 0, &l) != RING_OK)
        bail("tcp peer: %s", ring_last_error());
    port = sops->listener_port(l);
    if (tops->connect(ttp, "127.0.0.1", port, &c) != RING_OK)
        bail("tcp peer: connect: %s", ring_last_error());
    pat_fill(m1, first_len, 70, 0);
    pat_fill(m2, 300, 71, 0);
    memset(back, 9, sizeof(back));
    req_one(&s1, m1, first_len);
    req_one(&s2, m2, 300);
    req_one(&r1, in1, 1000);
    req_one(&r2, in2, 1000);
    req_one(&bs, back, sizeof(back));
    req_one(&br, back_in, sizeof(back_in));
    tops->post_send(c, &s1);
    tops->post_send(c, &s2);
    tops->post_recv(c, &br);
    while (!(r1.done && r2.done && br.done) && now_s() < until) {
        int moved;

        if (a == NULL) {
            if (sops->accept(l, &a) != RING_OK)
                break;
            if (a != NULL) {
                sops->post_recv(a, &r1);
                sops->post_recv(a, &r2);
                sops->post_send(a, &bs);
            }
        }
        moved = sops->progress(stp) + tops->progress(ttp);
        if (moved == 0)
            usleep(1000);
    }
    good = r1.done && r1.status == RING_OK && r1.bytes == first_len &&
           pat_bad(in1, first_len, 70, 0) < 0;
    if (!ok(good, "tcp peer: its first message (%zu bytes) reaches a 1000-byte receive whole, "
            "as over tcp (%s, %zu bytes)", first_len, ring_status_str(r1.status), r1.bytes))
        diag("    shm.c: the hand-shake reads the first message into hs_in (SHM_HS_BYTES = 128) "
             "and deliver_held() gives the caller only that: RING_ERR_MISMATCH for anything "
             "larger, whatever the caller's capacity");
    ok(r2.done && r2.status == RING_OK && r2.bytes == 300 && pat_bad(in2, 300, 71, 0) < 0,
       "tcp peer: its second message follows, whole (%s)", ring_status_str(r2.status));
    ok(a != NULL && a->phase == SHM_TCP && br.done && br.status == RING_OK && br.bytes == 20,
       "tcp peer: the connection is plain tcp and carries the reply too");
    if (a != NULL)
        sops->ep_close(a);
    tops->ep_close(c);
    sops->listener_close(l);
    sops->fini(stp);
    tops->fini(ttp);
    free(m1);
    free(m2);
    free(in1);
    free(in2);
}

/* ---- a hostile acceptor ---------------------------------------------------------------- */

/* read exactly n bytes from a socket within secs: 0, or -1 */
static int read_full(int fd, void *buf, size_t n, double secs)
{
    double until = now_s() + secs;
    unsigned char *p = buf;

    while (n > 0 && now_s() < until) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        ssize_t got;

        if (poll(&pfd, 1, 50) <= 0)
            continue;
        got = read(fd, p, n);
        if (got <= 0)
            return -1;
        p += got;
        n -= (size_t)got;
    }
    return n == 0 ? 0 : -1;
}

/* The victim: connect, then progress and wait(50) with a receive pending for 1.5 s. Exit
 * 0 when every wait returned within its time, 3 when one took over a second, 4 when the
 * endpoint never got going, 2 when it could not start. */
static void victim_child(int port)
{
    const ring_tp_ops_t *ops = ring_tp_find("shm");
    ring_tp_params_t params;
    ring_tp_t *tp = NULL;
    ring_tp_ep_t *ep = NULL;
    unsigned char buf[100];
    ring_tp_req_t r;
    double until;

    alarm(20);
    memset(&params, 0, sizeof(params));
    if (ops->init(&params, &tp) != RING_OK || ops->connect(tp, "127.0.0.1", port, &ep) != RING_OK)
        _exit(2);
    req_one(&r, buf, sizeof(buf));
    ops->post_recv(ep, &r);
    until = now_s() + 1.5;
    while (now_s() < until) {
        double t0 = now_s();

        if (ops->progress(tp) == 0)
            ops->wait(tp, 50);
        if (now_s() - t0 > 1.0)
            _exit(3);
    }
    _exit(ep->phase == SHM_PIPES || ep->phase == SHM_FAILED ? 0 : 4);
}

/*
 * The acceptor side done by hand: it answers the offer with a proper sealed segment but
 * passes an ordinary (blocking) pipe where the connector's eventfd belongs. The connector
 * may refuse it or use it, but its wait() must never block past its timeout: a process
 * stuck in a read() can no longer time out its other peers.
 */
static void test_hostile_eventfd(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t salen = sizeof(sa);
    unsigned char msg[4 + SHM_HS_BYTES], answer[4 + 6] = {6, 0, 0, 0, 'R', 'S', 'H', 'A', 1, 1};
    const size_t pipe_bytes = 65536, seg_bytes = SHM_DATA_OFFSET + 2 * 65536;
    int lfd, cfd = -1, seg = -1, ux = -1, pp[2] = {-1, -1}, ws = 0, status = -1, exited = 0;
    uint32_t len;
    pid_t pid;
    double until;
    const char *step = "accept";

    lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(lfd, 4) != 0 ||
        getsockname(lfd, (struct sockaddr *)&sa, &salen) != 0)
        bail("hostile acceptor: listen: %s", strerror(errno));
    fflush(stdout);
    pid = fork();
    if (pid < 0)
        bail("fork: %s", strerror(errno));
    if (pid == 0)
        victim_child(ntohs(sa.sin_port));
    {
        struct pollfd pfd = {.fd = lfd, .events = POLLIN};

        if (poll(&pfd, 1, 5000) == 1)
            cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    }
    if (cfd >= 0) {
        step = "read the offer";
        if (read_full(cfd, msg, 4, 3) == 0) {
            len = (uint32_t)msg[0] | (uint32_t)msg[1] << 8 | (uint32_t)msg[2] << 16 |
                  (uint32_t)msg[3] << 24;
            if (len >= 6 + SHM_TOKEN_BYTES && len <= SHM_HS_BYTES &&
                read_full(cfd, msg + 4, len, 3) == 0 && memcmp(msg + 4, "RSHO", 4) == 0 &&
                msg[9] > 0 && len == 6u + SHM_TOKEN_BYTES + msg[9])
                step = "make the segment";
        }
    }
    if (strcmp(step, "make the segment") == 0) {
        void *map;

        seg = memfd_create("ringd-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (seg >= 0 && ftruncate(seg, (off_t)seg_bytes) == 0 &&
            fcntl(seg, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0 &&
            (map = mmap(NULL, seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, seg, 0)) !=
                MAP_FAILED) {
            shm_seg_hdr_t *hdr = map;

            hdr->magic = SHM_SEG_MAGIC;
            hdr->version = 1;
            hdr->pipe_bytes = pipe_bytes;
            munmap(map, seg_bytes);
            if (pipe2(pp, O_CLOEXEC) == 0)
                step = "hand it over";
        }
    }
    if (strcmp(step, "hand it over") == 0) {
        struct sockaddr_un ua;
        size_t name_len = msg[9];
        shm_handover_t ho;
        struct iovec iov = {.iov_base = &ho, .iov_len = sizeof(ho)};
        union {
            struct cmsghdr h;
            char buf[CMSG_SPACE(SHM_NFDS * sizeof(int))];
        } cm;
        struct msghdr mh;
        int fds[SHM_NFDS] = {seg, pp[0], pp[1]}; /* the connector's "eventfd": a pipe's read end */

        memset(&ua, 0, sizeof(ua));
        ua.sun_family = AF_UNIX;
        memcpy(ua.sun_path + 1, msg + 4 + 6 + SHM_TOKEN_BYTES, name_len);
        memcpy(ho.token, msg + 4 + 6, SHM_TOKEN_BYTES);
        ho.pipe_bytes = pipe_bytes;
        memset(&mh, 0, sizeof(mh));
        memset(&cm, 0, sizeof(cm));
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = cm.buf;
        mh.msg_controllen = sizeof(cm.buf);
        cm.h.cmsg_level = SOL_SOCKET;
        cm.h.cmsg_type = SCM_RIGHTS;
        cm.h.cmsg_len = CMSG_LEN(sizeof(fds));
        memcpy(CMSG_DATA(&cm.h), fds, sizeof(fds));
        ux = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (ux >= 0 &&
            connect(ux, (struct sockaddr *)&ua,
                    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + name_len)) == 0 &&
            sendmsg(ux, &mh, MSG_NOSIGNAL) == (ssize_t)sizeof(ho) &&
            write(cfd, answer, sizeof(answer)) == (ssize_t)sizeof(answer))
            step = "done";
    }
    until = now_s() + 3.5;
    while (now_s() < until) {
        pid_t w = waitpid(pid, &ws, WNOHANG);

        if (w == pid) {
            exited = 1;
            status = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
            break;
        }
        usleep(10000);
    }
    if (!exited) {
        char path[64], line[256] = "";
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/syscall", (int)pid);
        if ((f = fopen(path, "r")) != NULL) {
            if (fgets(line, sizeof(line), f) != NULL)
                line[strcspn(line, "\n")] = '\0';
            fclose(f);
        }
        diag("hostile acceptor: the connector is stuck in /proc/%d/syscall: %s (0 = read, then "
             "the fd)", (int)pid, line);
        kill(pid, SIGKILL);
        waitpid(pid, &ws, 0);
    }
    ok(strcmp(step, "done") == 0, "hostile acceptor: it answered the offer with a sealed segment "
       "and a pipe for an eventfd (last step: %s)", step);
    if (!ok(exited && status == 0, "hostile acceptor: the connector's wait(50) never blocks "
            "(%s)", !exited ? "still stuck 3.5 s later: killed" : status == 3 ? "a wait took over "
            "1 s" : status == 0 ? "every wait returned in time" : "it could not run"))
        diag("    shm_ep_wake_done() reads ep->efd_mine with eventfd_read(), counting on the "
             "EFD_NONBLOCK the acceptor set; shm_seg_claim() never checks that the fds it "
             "received are non-blocking eventfds");
    for (int i = 0; i < 2; i++)
        if (pp[i] >= 0)
            close(pp[i]);
    if (seg >= 0)
        close(seg);
    if (ux >= 0)
        close(ux);
    if (cfd >= 0)
        close(cfd);
    close(lfd);
}

/* ---- an endpoint closed during its hand-over ----------------------------------------- */

/* The connector closes its endpoint after the acceptor handed the segment over, before the
 * answer came: once both ends are closed (and another pair has come and gone, collecting
 * what waits on the unix socket), no descriptor of it may stay open. */
static void test_close_in_handover(void)
{
    const ring_tp_ops_t *ops = ring_tp_find("shm");
    ring_tp_params_t params;
    ring_tp_t *tp = NULL;
    ring_tp_listener_t *l = NULL;
    ring_tp_ep_t *c = NULL, *a = NULL, *c2 = NULL, *a2 = NULL;
    double until = now_s() + 5;
    int port, fds0, fds1, c_offering;

    memset(&params, 0, sizeof(params));
    unsetenv("RING_SHM_BYTES");
    if (ops->init(&params, &tp) != RING_OK || ops->listen(tp, "127.0.0.1", 0, &l) != RING_OK)
        bail("close in hand-over: %s", ring_last_error());
    port = ops->listener_port(l);
    /* a first pair makes the unix listener; count from there */
    if (ops->connect(tp, "127.0.0.1", port, &c2) != RING_OK)
        bail("close in hand-over: connect: %s", ring_last_error());
    while ((a2 == NULL || a2->phase != SHM_PIPES || c2->phase != SHM_PIPES) && now_s() < until) {
        if (a2 == NULL && ops->accept(l, &a2) != RING_OK)
            break;
        if (ops->progress(tp) == 0)
            ops->wait(tp, 5);
    }
    ops->ep_close(c2);
    ops->ep_close(a2);
    c2 = a2 = NULL;
    fds0 = count_fds();
    if (ops->connect(tp, "127.0.0.1", port, &c) != RING_OK)
        bail("close in hand-over: connect: %s", ring_last_error());
    while ((a == NULL || a->phase == SHM_ANSWERING || a->phase == SHM_READING_OFFER) &&
           now_s() < until) {
        if (a == NULL && ops->accept(l, &a) != RING_OK)
            break;
        if (ops->progress(tp) == 0)
            ops->wait(tp, 5);
    }
    c_offering = c->phase == SHM_OFFERING;
    ok(a != NULL && a->phase == SHM_PIPES && c_offering, "close in hand-over: the acceptor "
       "handed its segment over, the connector has not taken it yet");
    ops->ep_close(c);
    ops->ep_close(a);
    /* another pair: the connector collects what waits on its unix socket */
    a2 = NULL;
    if (ops->connect(tp, "127.0.0.1", port, &c2) != RING_OK)
        bail("close in hand-over: connect: %s", ring_last_error());
    while ((a2 == NULL || a2->phase != SHM_PIPES || c2->phase != SHM_PIPES) && now_s() < until) {
        if (a2 == NULL && ops->accept(l, &a2) != RING_OK)
            break;
        if (ops->progress(tp) == 0)
            ops->wait(tp, 5);
    }
    ok(c2->phase == SHM_PIPES, "close in hand-over: a later connection still moves to shared "
       "memory");
    ops->ep_close(c2);
    ops->ep_close(a2);
    fds1 = count_fds();
    if (!is_int(fds1, fds0, "close in hand-over: with every endpoint closed, the descriptors are "
                "back to %d (before fini)", fds0)) {
        diag("    the hand-over of the closed endpoint (its segment and 2 eventfds) stays in "
             "shm_tp_t.arrivals: a received arrival never expires (SHM_ARRIVAL_TTL_S applies "
             "only to connections not yet read) and shm_ep_close does not drop its token's");
        diag_fds();
    }
    ops->listener_close(l);
    ops->fini(tp);
}

/* ---- many connections at once ----------------------------------------------------------- */

/* As many connections as a ring with many channels and streams opens to one neighbour, all
 * at once: every one must move to shared memory (the connector collects the hand-overs
 * that arrive for all of them) and carry a message. */
static void test_many(int k)
{
    const ring_tp_ops_t *ops = ring_tp_find("shm");
    ring_tp_params_t params;
    ring_tp_t *tp = NULL;
    ring_tp_listener_t *l = NULL;
    ring_tp_ep_t **c = calloc((size_t)k, sizeof(*c)), **a = calloc((size_t)k, sizeof(*a));
    int port, na = 0, pipes = 0, failed = 0, delivered = 0;
    double until = now_s() + 10;
    char first_why[260] = "";

    memset(&params, 0, sizeof(params));
    unsetenv("RING_SHM_BYTES");
    if (c == NULL || a == NULL || ops->init(&params, &tp) != RING_OK ||
        ops->listen(tp, "127.0.0.1", 0, &l) != RING_OK)
        bail("many: %s", ring_last_error());
    port = ops->listener_port(l);
    for (int i = 0; i < k; i++)
        if (ops->connect(tp, "127.0.0.1", port, &c[i]) != RING_OK)
            bail("many: connect #%d: %s", i, ring_last_error());
    while (now_s() < until) {
        int settled = 0;

        while (na < k) {
            ring_tp_ep_t *ep = NULL;

            if (ops->accept(l, &ep) != RING_OK || ep == NULL)
                break;
            a[na++] = ep;
        }
        if (ops->progress(tp) == 0)
            ops->wait(tp, 10);
        for (int i = 0; i < k; i++)
            settled += c[i]->phase == SHM_PIPES || c[i]->phase == SHM_FAILED ||
                       c[i]->phase == SHM_TCP;
        for (int i = 0; i < na; i++)
            settled += a[i]->phase == SHM_PIPES || a[i]->phase == SHM_FAILED ||
                       a[i]->phase == SHM_TCP;
        if (na == k && settled == 2 * k)
            break;
    }
    for (int i = 0; i < k; i++) {
        pipes += c[i]->phase == SHM_PIPES;
        if (c[i]->phase == SHM_FAILED && failed++ == 0)
            snprintf(first_why, sizeof(first_why), "%s (%s)", c[i]->why,
                     ring_status_str(c[i]->error));
    }
    for (int i = 0; i < na; i++)
        pipes += a[i]->phase == SHM_PIPES;
    if (!ok(na == k && pipes == 2 * k, "many: %d connections opened at once: all %d ends "
            "move to shared memory (%d did, %d connectors failed)", k, 2 * k, pipes, failed))
        diag("    first failure: %s", first_why);
    /* a message on each, connector to acceptor: the pairing is by tcp connection */
    {
        ring_tp_req_t *s = calloc((size_t)k, sizeof(*s)), *r = calloc((size_t)k, sizeof(*r));
        ring_tp_req_t **all = calloc(2 * (size_t)k, sizeof(*all));
        unsigned char *out = calloc((size_t)k, 8), *in = calloc((size_t)k, 8);
        int n = 0;

        for (int i = 0; i < k && i < na; i++) {
            if (c[i]->phase != SHM_PIPES)
                continue;
            memcpy(out + 8 * i, &i, sizeof(i));
            req_one(&s[i], out + 8 * i, sizeof(i));
            ops->post_send(c[i], &s[i]);
            all[n++] = &s[i];
        }
        for (int i = 0; i < na; i++) {
            if (a[i]->phase != SHM_PIPES)
                continue;
            req_one(&r[i], in + 8 * i, 8);
            ops->post_recv(a[i], &r[i]);
            all[n++] = &r[i];
        }
        run_reqs(tp, ops, all, n, 2);
        for (int i = 0; i < na; i++)
            delivered += r[i].done && r[i].status == RING_OK && r[i].bytes == sizeof(int);
        ok(delivered == k, "many: a message on each of the %d connections arrives (%d did)", k,
           delivered);
        /* the endpoints go first: they complete what is still pending */
        for (int i = 0; i < k; i++)
            ops->ep_close(c[i]);
        for (int i = 0; i < na; i++)
            ops->ep_close(a[i]);
        free(s);
        free(r);
        free(all);
        free(out);
        free(in);
    }
    ops->listener_close(l);
    ops->fini(tp);
    free(c);
    free(a);
}

/* ---- two processes --------------------------------------------------------------------- */

#define ECHO_MAX 300000

/* The child: connect, echo every message back until the parent kills it. */
static void echo_child(int port)
{
    const ring_tp_ops_t *ops = ring_tp_find("shm");
    ring_tp_params_t params;
    ring_tp_t *tp = NULL;
    ring_tp_ep_t *ep = NULL;
    unsigned char *buf = malloc(ECHO_MAX);
    ring_tp_req_t r, s, *rr[1] = {&r}, *ss[1] = {&s};

    alarm(20);
    memset(&params, 0, sizeof(params));
    if (buf == NULL || ops->init(&params, &tp) != RING_OK ||
        ops->connect(tp, "127.0.0.1", port, &ep) != RING_OK)
        _exit(2);
    for (int i = 0; i < 100000; i++) {
        req_one(&r, buf, ECHO_MAX);
        if (ops->post_recv(ep, &r) != RING_OK || !run_reqs(tp, ops, rr, 1, 15) ||
            r.status != RING_OK)
            _exit(3);
        req_one(&s, buf, r.bytes);
        if (ops->post_send(ep, &s) != RING_OK || !run_reqs(tp, ops, ss, 1, 15) ||
            s.status != RING_OK)
            _exit(4);
    }
    _exit(5);
}

static void test_two_processes(void)
{
    enum { TRIPS = 400 };
    const ring_tp_ops_t *ops = ring_tp_find("shm");
    ring_tp_params_t params;
    ring_tp_t *tp = NULL;
    ring_tp_listener_t *l = NULL;
    ring_tp_ep_t *ep = NULL;
    unsigned char *out = xmalloc(ECHO_MAX), *in = xmalloc(ECHO_MAX);
    ring_tp_req_t s, r, *rr[1] = {&r};
    double until, worst = 0, t_all, t_kill;
    int port, bad = 0, trips = 0, ws = 0, in_pipes, done;
    pid_t pid;
    uint64_t x = 99;

    memset(&params, 0, sizeof(params));
    setenv("RING_SHM_BYTES", "64K", 1); /* the acceptor's choice: the child inherits it anyway */
    if (ops->init(&params, &tp) != RING_OK || ops->listen(tp, "127.0.0.1", 0, &l) != RING_OK)
        bail("two processes: %s", ring_last_error());
    port = ops->listener_port(l);
    fflush(stdout);
    pid = fork();
    if (pid < 0)
        bail("fork: %s", strerror(errno));
    if (pid == 0)
        echo_child(port);
    until = now_s() + 5;
    while (ep == NULL && now_s() < until) {
        if (ops->accept(l, &ep) != RING_OK)
            break;
        if (ep == NULL && ops->progress(tp) == 0)
            ops->wait(tp, 10);
    }
    if (ep == NULL) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        bail("two processes: the child never connected");
    }
    /* round trips; wait(1000) when nothing moves, so a lost wake-up costs a second */
    t_all = now_s();
    for (int i = 0; i < TRIPS; i++) {
        size_t len;
        double t0 = now_s(), dt;

        x = x * 6364136223846793005ull + 1442695040888963407ull;
        len = i % 10 == 9 ? ECHO_MAX - (size_t)(x >> 50) : (size_t)(x >> 33) % 200;
        pat_fill(out, len, (uint32_t)i, 0);
        req_one(&s, out, len);
        req_one(&r, in, ECHO_MAX);
        ops->post_recv(ep, &r);
        ops->post_send(ep, &s);
        until = now_s() + 10;
        while ((!s.done || !r.done) && now_s() < until)
            if (ops->progress(tp) == 0)
                ops->wait(tp, 1000);
        dt = now_s() - t0;
        if (dt > worst)
            worst = dt;
        if (!r.done || r.status != RING_OK || r.bytes != len || pat_bad(in, len, (uint32_t)i, 0) >= 0) {
            if (bad++ < 3)
                diag("round trip %d (%zu bytes): done %d %s bytes %zu", i, len, r.done,
                     ring_status_str(r.status), r.bytes);
            if (!r.done)
                break;
        }
        trips++;
    }
    t_all = now_s() - t_all;
    in_pipes = ep->phase == SHM_PIPES;
    ok(in_pipes && trips == TRIPS && bad == 0, "two processes: %d echo round trips of 0..300000 "
       "bytes through 64 KiB pipes, intact (%.2f s)", trips, t_all);
    ok(worst < 0.9, "two processes: no wake-up lost: the slowest round trip took %.3f s "
       "(waits of 1 s)", worst);

    /* the peer dies while we wait for it */
    req_one(&r, in, ECHO_MAX);
    req_one(&s, out, 0);
    ops->post_recv(ep, &r); /* the child echoes nothing: it is killed first */
    kill(pid, SIGKILL);
    t_kill = now_s();
    done = run_reqs(tp, ops, rr, 1, 5);
    t_kill = now_s() - t_kill;
    ok(done && (r.status == RING_ERR_REMOTE || r.status == RING_ERR_IO) && t_kill < 2.0,
       "two processes: SIGKILL of the peer fails the pending receive (%s, errno %d) in %.3f s",
       ring_status_str(r.status), r.sys_errno, t_kill);
    ok(ops->post_send(ep, &s) != RING_OK && s.done, "two processes: later sends fail at once");
    until = now_s() + 5;
    while (waitpid(pid, &ws, WNOHANG) == 0 && now_s() < until)
        usleep(10000);
    ops->ep_close(ep);
    ops->listener_close(l);
    ops->fini(tp);
    unsetenv("RING_SHM_BYTES");
    free(out);
    free(in);
}

int main(void)
{
    double t_start = now_s();
    int fds0 = count_fds();

    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    alarm(60);
    test_early(0);
    test_early(1);
    test_tcp_peer(100);
    test_tcp_peer(300);
    test_hostile_eventfd();
    test_close_in_handover();
    test_many(64);
    test_many(100);
    test_two_processes();
    check_no_fd_left(fds0);
    diag("t-shm-handshake: %.1f s", now_s() - t_start);
    return done_testing();
}

/*
 * shm_seg.c - the shared-memory segment of an endpoint and its hand-over.
 *
 * The acceptor makes the segment: a memfd (never a name in /dev/shm, so
 * nothing can leak, whatever way a process ends), sealed against growing
 * and shrinking so that the peer cannot make our accesses fault, and two
 * eventfds. It connects to the connector's abstract unix socket (reachable
 * only from the same host and network namespace: that is the "same host"
 * test) and sends them with SCM_RIGHTS, with the random token the connector
 * put in its offer. The connector picks up what arrived for its token and
 * checks the segment (size, seals, header) before it maps it.
 */
#include "ring_build.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "clock.h"
#include "shm_int.h"

#define SHM_NAME_PREFIX "ringd-shm-"
#define SHM_ARRIVAL_TTL_S 10.0 /* a hand-over unread or unclaimed this long is dropped */

int shm_random(void *buf, size_t len)
{
    unsigned char *p = buf;

    while (len > 0) {
        ssize_t got = getrandom(p, len, 0);

        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return -1;
        p += got;
        len -= (size_t)got;
    }
    return 0;
}

static socklen_t ux_addr(const char *name, struct sockaddr_un *sa)
{
    size_t len = strlen(name);

    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    memcpy(sa->sun_path + 1, name, len); /* sun_path[0] = 0: the abstract namespace */
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
}

/* FNV-1a: a name's part, not a secret (the segment goes only to whom the socket
 * reaches, and the engine's hello checks the peer) */
uint32_t shm_scope(const char *host_id)
{
    uint32_t h = 2166136261u;

    for (const char *p = host_id != NULL ? host_id : ""; *p != '\0'; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return h;
}

int shm_name_scope(const char *name, uint32_t *scope_p)
{
    const char *p;
    uint32_t v = 0;

    if (strncmp(name, SHM_NAME_PREFIX, strlen(SHM_NAME_PREFIX)) != 0)
        return -1;
    p = name + strlen(SHM_NAME_PREFIX);
    for (int i = 0; i < 8; i++, p++) { /* a shorter name stops at its NUL */
        int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;

        if (d < 0)
            return -1;
        v = v << 4 | (uint32_t)d;
    }
    if (*p != '-')
        return -1;
    *scope_p = v;
    return 0;
}

int shm_ux_listen(shm_tp_t *tp)
{
    struct sockaddr_un sa;
    unsigned char r[8];
    socklen_t len;
    int fd;

    if (tp->ux_fd >= 0)
        return 0;
    if (shm_random(r, sizeof(r)) != 0)
        return -1;
    snprintf(tp->ux_name, sizeof(tp->ux_name),
             SHM_NAME_PREFIX "%08x-%ld-%02x%02x%02x%02x%02x%02x%02x%02x", (unsigned)tp->scope,
             (long)getpid(), r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    len = ux_addr(tp->ux_name, &sa);
    if (bind(fd, (struct sockaddr *)&sa, len) != 0 || listen(fd, 256) != 0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    tp->ux_fd = fd;
    return 0;
}

static void arrival_drop(shm_arrival_t *a)
{
    if (a->conn_fd >= 0)
        close(a->conn_fd);
    if (a->seg_fd >= 0)
        close(a->seg_fd);
    if (a->efd_mine >= 0)
        close(a->efd_mine);
    if (a->efd_peer >= 0)
        close(a->efd_peer);
    memset(a, 0, sizeof(*a));
    a->conn_fd = a->seg_fd = a->efd_mine = a->efd_peer = -1;
}

void shm_ux_close(shm_tp_t *tp)
{
    for (int i = 0; i < SHM_ARRIVALS; i++)
        if (tp->arrivals[i].used)
            arrival_drop(&tp->arrivals[i]);
    if (tp->ux_fd >= 0)
        close(tp->ux_fd);
    tp->ux_fd = -1;
}

/* ---- acceptor: make and hand over ----------------------------------- */

static int seg_make(size_t pipe_bytes, int *fd_p, void **map_p, size_t *bytes_p)
{
    size_t bytes = SHM_DATA_OFFSET + 2 * pipe_bytes;
    int fd = memfd_create("ringd-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    void *map;

    if (fd < 0)
        return -1;
    if (ftruncate(fd, (off_t)bytes) != 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    *fd_p = fd;
    *map_p = map;
    *bytes_p = bytes;
    return 0;
}

/* Point ep's pipes into its mapped segment: ctl[0] carries acceptor to connector. */
static void seg_attach(ring_tp_ep_t *ep, uint64_t pipe_bytes)
{
    unsigned char *base = ep->seg;
    shm_ctl_t *ctl = (shm_ctl_t *)(base + SHM_CTL_OFFSET);
    unsigned char *data0 = base + SHM_DATA_OFFSET, *data1 = data0 + pipe_bytes;
    shm_pipe_t a2c = {.ctl = &ctl[0], .data = data0, .size = pipe_bytes, .mask = pipe_bytes - 1};
    shm_pipe_t c2a = {.ctl = &ctl[1], .data = data1, .size = pipe_bytes, .mask = pipe_bytes - 1};

    ep->tx = ep->acceptor ? a2c : c2a;
    ep->rx = ep->acceptor ? c2a : a2c;
    /* the indices start where they are: 0 in a new segment */
    ep->tx.pos = atomic_load_explicit(&ep->tx.ctl->head, memory_order_acquire);
    ep->rx.pos = atomic_load_explicit(&ep->rx.ctl->tail, memory_order_acquire);
}

int shm_seg_offer(shm_tp_t *tp, ring_tp_ep_t *ep, const char *name, char *why, size_t whylen)
{
    struct sockaddr_un sa;
    shm_handover_t ho;
    struct msghdr msg;
    struct iovec iov;
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(SHM_NFDS * sizeof(int))];
    } cm;
    int ux, seg_fd = -1, efd_acc = -1, efd_conn = -1, fds[SHM_NFDS];
    shm_seg_hdr_t *hdr;
    uint32_t scope;

    if (shm_name_scope(name, &scope) != 0) {
        snprintf(why, whylen, "its offer names no ringd socket");
        return -1;
    }
    if (scope != tp->scope) {
        snprintf(why, whylen, "it declares another host (--host-id differs)");
        return -1;
    }
    ux = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (ux < 0) {
        snprintf(why, whylen, "cannot create a unix socket: %s", strerror(errno));
        return -1;
    }
    if (connect(ux, (struct sockaddr *)&sa, ux_addr(name, &sa)) != 0) {
        /* ECONNREFUSED: not on this host (or another network namespace) */
        snprintf(why, whylen, "its socket is not reachable from here (%s): another host",
                 strerror(errno));
        close(ux);
        return -1;
    }
    if (seg_make(tp->pipe_bytes, &seg_fd, &ep->seg, &ep->seg_bytes) != 0) {
        snprintf(why, whylen, "cannot make a shared-memory segment of %zu bytes: %s",
                 SHM_DATA_OFFSET + 2 * tp->pipe_bytes, strerror(errno));
        close(ux);
        return -1;
    }
    efd_acc = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    efd_conn = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (efd_acc < 0 || efd_conn < 0) {
        snprintf(why, whylen, "cannot create an eventfd: %s", strerror(errno));
        goto fail;
    }
    hdr = ep->seg;
    hdr->magic = SHM_SEG_MAGIC;
    hdr->version = 1;
    hdr->pipe_bytes = tp->pipe_bytes;
    memcpy(ho.token, ep->token, SHM_TOKEN_BYTES);
    ho.pipe_bytes = tp->pipe_bytes;
    iov.iov_base = &ho;
    iov.iov_len = sizeof(ho);
    memset(&msg, 0, sizeof(msg));
    memset(&cm, 0, sizeof(cm));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cm.buf;
    msg.msg_controllen = sizeof(cm.buf);
    cm.h.cmsg_level = SOL_SOCKET;
    cm.h.cmsg_type = SCM_RIGHTS;
    cm.h.cmsg_len = CMSG_LEN(SHM_NFDS * sizeof(int));
    fds[0] = seg_fd;
    fds[1] = efd_conn; /* the connector's own */
    fds[2] = efd_acc;  /* the connector wakes us through it */
    memcpy(CMSG_DATA(&cm.h), fds, sizeof(fds));
    if (sendmsg(ux, &msg, MSG_NOSIGNAL) != (ssize_t)sizeof(ho)) {
        snprintf(why, whylen, "cannot hand the segment over: %s", strerror(errno));
        goto fail;
    }
    close(ux);
    close(seg_fd);
    ep->efd_mine = efd_acc;
    ep->efd_peer = efd_conn;
    seg_attach(ep, tp->pipe_bytes);
    return 0;

fail:
    close(ux);
    close(seg_fd);
    if (efd_acc >= 0)
        close(efd_acc);
    if (efd_conn >= 0)
        close(efd_conn);
    munmap(ep->seg, ep->seg_bytes);
    ep->seg = NULL;
    return -1;
}

/* ---- connector: collect and claim -------------------------------------- */

/* Read one connection's hand-over into a: 1 done, 0 nothing yet, -1 drop it. */
static int arrival_read(shm_arrival_t *a)
{
    shm_handover_t ho;
    struct msghdr msg;
    struct iovec iov = {.iov_base = &ho, .iov_len = sizeof(ho)};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(SHM_NFDS * sizeof(int))];
    } cm;
    struct cmsghdr *c;
    ssize_t got;
    int nfds = 0, fds[SHM_NFDS];

    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cm.buf;
    msg.msg_controllen = sizeof(cm.buf);
    do
        got = recvmsg(a->conn_fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    while (got < 0 && errno == EINTR);
    if (got < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    for (c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
        size_t n;

        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int fd;

            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (nfds < SHM_NFDS)
                fds[nfds++] = fd;
            else
                close(fd); /* more than a hand-over carries: not ours to keep */
        }
    }
    if (got != (ssize_t)sizeof(ho) || nfds != SHM_NFDS || (msg.msg_flags & MSG_CTRUNC)) {
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        return -1;
    }
    /* eventfds are ours to read without blocking: a hostile peer's pipe must not
     * become a read() that never returns */
    for (int i = 1; i < SHM_NFDS; i++) {
        int fl = fcntl(fds[i], F_GETFL);
        if (fl < 0 || fcntl(fds[i], F_SETFL, fl | O_NONBLOCK) != 0) {
            for (int j = 0; j < nfds; j++)
                close(fds[j]);
            return -1;
        }
    }
    memcpy(a->token, ho.token, SHM_TOKEN_BYTES);
    a->pipe_bytes = ho.pipe_bytes;
    a->seg_fd = fds[0];
    a->efd_mine = fds[1];
    a->efd_peer = fds[2];
    close(a->conn_fd);
    a->conn_fd = -1;
    a->received = 1;
    return 1;
}

/* Accept what waits on the unix socket and read what has come. */
static void arrivals_collect(shm_tp_t *tp)
{
    double now = ring_now();

    for (;;) {
        int fd = accept4(tp->ux_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), slot = -1;

        if (fd < 0)
            break;
        for (int i = 0; i < SHM_ARRIVALS && slot < 0; i++)
            if (!tp->arrivals[i].used)
                slot = i;
        if (slot < 0) {
            /* full (a flood of strangers): the oldest makes room; its endpoint, if
             * any, fails with an error it reports, never hangs */
            slot = 0;
            for (int i = 1; i < SHM_ARRIVALS; i++)
                if (tp->arrivals[i].seq < tp->arrivals[slot].seq)
                    slot = i;
            arrival_drop(&tp->arrivals[slot]);
        }
        tp->arrivals[slot].used = 1;
        tp->arrivals[slot].conn_fd = fd;
        tp->arrivals[slot].since = now;
        tp->arrivals[slot].seq = ++tp->arrival_seq;
    }
    for (int i = 0; i < SHM_ARRIVALS; i++) {
        shm_arrival_t *a = &tp->arrivals[i];

        if (!a->used)
            continue;
        if ((!a->received && arrival_read(a) < 0) || now - a->since > SHM_ARRIVAL_TTL_S)
            arrival_drop(a);
    }
}

/* Check and map the segment that came for ep. */
static int seg_map(ring_tp_ep_t *ep, shm_arrival_t *a, char *why, size_t whylen)
{
    struct stat st;
    uint64_t pb = a->pipe_bytes;
    size_t bytes;
    int seals;
    const shm_seg_hdr_t *hdr;

    if (pb < 4096 || pb > ((uint64_t)1 << 30) || (pb & (pb - 1)) != 0) {
        snprintf(why, whylen, "its segment's pipes of %llu bytes are not a power of two "
                 "in 4 KiB..1 GiB", (unsigned long long)pb);
        return -1;
    }
    bytes = SHM_DATA_OFFSET + 2 * (size_t)pb;
    seals = fcntl(a->seg_fd, F_GET_SEALS);
    if (fstat(a->seg_fd, &st) != 0 || (size_t)st.st_size != bytes || seals < 0 ||
        (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW)) {
        snprintf(why, whylen, "its segment is not a sealed memfd of %zu bytes", bytes);
        return -1;
    }
    ep->seg = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, a->seg_fd, 0);
    if (ep->seg == MAP_FAILED) {
        ep->seg = NULL;
        snprintf(why, whylen, "cannot map its segment of %zu bytes: %s", bytes, strerror(errno));
        return -1;
    }
    ep->seg_bytes = bytes;
    hdr = ep->seg;
    if (hdr->magic != SHM_SEG_MAGIC || hdr->version != 1 || hdr->pipe_bytes != pb) {
        snprintf(why, whylen, "its segment's header is not ringd's");
        munmap(ep->seg, bytes);
        ep->seg = NULL;
        return -1;
    }
    seg_attach(ep, pb);
    return 0;
}

int shm_seg_claim(shm_tp_t *tp, ring_tp_ep_t *ep, char *why, size_t whylen)
{
    if (tp->ux_fd < 0) {
        snprintf(why, whylen, "this peer has no unix socket for the hand-over");
        return -1;
    }
    arrivals_collect(tp);
    for (int i = 0; i < SHM_ARRIVALS; i++) {
        shm_arrival_t *a = &tp->arrivals[i];
        int rc;

        if (!a->used || !a->received || memcmp(a->token, ep->token, SHM_TOKEN_BYTES) != 0)
            continue;
        rc = seg_map(ep, a, why, whylen);
        if (rc == 0) {
            ep->efd_mine = a->efd_mine;
            ep->efd_peer = a->efd_peer;
            a->efd_mine = a->efd_peer = -1; /* the endpoint's now */
        }
        arrival_drop(a);
        return rc == 0 ? 1 : -1;
    }
    return 0;
}

void shm_arrival_forget(shm_tp_t *tp, const unsigned char token[SHM_TOKEN_BYTES])
{
    if (tp->ux_fd < 0)
        return;
    arrivals_collect(tp);
    for (int i = 0; i < SHM_ARRIVALS; i++)
        if (tp->arrivals[i].used && tp->arrivals[i].received &&
            memcmp(tp->arrivals[i].token, token, SHM_TOKEN_BYTES) == 0)
            arrival_drop(&tp->arrivals[i]);
}

void shm_seg_release(ring_tp_ep_t *ep)
{
    if (ep->seg != NULL)
        munmap(ep->seg, ep->seg_bytes);
    ep->seg = NULL;
    if (ep->efd_mine >= 0)
        close(ep->efd_mine);
    if (ep->efd_peer >= 0)
        close(ep->efd_peer);
    ep->efd_mine = ep->efd_peer = -1;
}

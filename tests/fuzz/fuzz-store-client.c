/* fuzz-store-client.c - libFuzzer: the replies a tcp store client reads from
 * a server that may be a stranger (src/store_tcp.c: store_call, io_all,
 * tcp_authenticate, the reply decoder of store_proto.c). The harness plays
 * the server over a socketpair: it writes the input's bytes as everything
 * the server ever says and shuts its side, then the real client opens the
 * store (the secret's challenge-response first when the first byte's bit 0
 * says so, then the hello) and, when that worked, sets, gets and checks a
 * key. Bits 1-2 pick the caller's buffer for the get. No network, no
 * thread; every read finds its bytes there or the end of the stream. */
#include "ring_build.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth.h"
#include "clock.h"
#include "store.h"

#define MAX_INPUT (64 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static ring_auth_key_t key;
    static const size_t caps[4] = {1, 16, 512, 4096};
    int sv[2], present;
    ring_store_t *s = NULL;
    char value[4096];
    size_t cap, off = 1;

    if (size < 1 || size > MAX_INPUT)
        return 0;
    if (!key.on)
        (void)ring_auth_key_from("fuzzing-secret-0123456789", 25, &key);
    cap = caps[(data[0] >> 1) & 3];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return 0;
    /* the server's side: all it will ever say, then the end of its stream */
    while (off < size) {
        ssize_t n = send(sv[1], data + off, size - off, MSG_DONTWAIT | MSG_NOSIGNAL);

        if (n <= 0 && errno != EINTR)
            break; /* the socket's buffer is full: the rest is never sent */
        if (n > 0)
            off += (size_t)n;
    }
    shutdown(sv[1], SHUT_WR);
    if (ring_store_tcp_open_fd(sv[0], "tcp://fuzz:1", "fuzzjob", (data[0] & 1) ? &key : NULL,
                               5.0, &s) == RING_OK) {
        (void)s->ops->set(s, "rank/1", "tcp://127.0.0.1:29501 host-b 1");
        if (s->ops->get(s, "rank/0", value, cap, ring_now() + 5.0) == RING_OK &&
            strnlen(value, cap) >= cap)
            __builtin_trap(); /* a value must come back NUL-terminated in its buffer */
        (void)s->ops->check(s, "rank/2", &present);
        s->ops->close(s, 0);
    }
    close(sv[1]);
    return 0;
}

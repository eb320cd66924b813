/* loopback.c - loopback.h's sockets on 127.0.0.1. */
#include "ring_build.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loopback.h"

static struct sockaddr_in lo_addr(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};

    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    return a;
}

int lo_listen(int port)
{
    struct sockaddr_in a = lo_addr(port);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

    if (fd < 0)
        return -1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 64) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int lo_dial(int port)
{
    struct sockaddr_in a = lo_addr(port);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

int lo_port_of(const char *peers, int rank)
{
    const char *p = peers;

    for (int i = 0; i < rank && p != NULL; i++) {
        p = strchr(p, ',');
        p = p != NULL ? p + 1 : NULL;
    }
    if (p == NULL)
        return 0;
    for (const char *q = p; *q != '\0' && *q != ','; q++)
        if (*q == ':')
            p = q + 1;
    return atoi(p);
}

/* tcp_addr.c - resolving hosts and interface names, formatting addresses, socket options. */
#include "ring_build.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>

#include "tcp_int.h"

/* An interface name ("eth0") stands for its first address, IPv4 first. */
static int tcp_resolve_iface(const char *name, int port, struct sockaddr_storage *ss,
                             socklen_t *sslen)
{
    struct ifaddrs *ifa_list, *ifa;
    int found = 0;

    if (getifaddrs(&ifa_list) != 0)
        return -1;
    for (int family = AF_INET; family != 0 && !found; family = family == AF_INET ? AF_INET6 : 0)
        for (ifa = ifa_list; ifa != NULL && !found; ifa = ifa->ifa_next) {
            if (ifa->ifa_addr == NULL || ifa->ifa_addr->sa_family != family ||
                strcmp(ifa->ifa_name, name) != 0)
                continue;
            if (family == AF_INET) {
                struct sockaddr_in *sin = (struct sockaddr_in *)ss;
                memcpy(sin, ifa->ifa_addr, sizeof(*sin));
                sin->sin_port = htons((uint16_t)port);
                *sslen = sizeof(*sin);
            } else {
                struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
                memcpy(sin6, ifa->ifa_addr, sizeof(*sin6));
                sin6->sin6_port = htons((uint16_t)port);
                *sslen = sizeof(*sin6);
            }
            found = 1;
        }
    freeifaddrs(ifa_list);
    return found ? 0 : -1;
}

int tcp_resolve(const char *host, int port, int passive, struct sockaddr_storage *ss,
                socklen_t *sslen, char *err, size_t errlen)
{
    struct addrinfo hints, *res = NULL;
    char service[16];
    int rc;

    memset(ss, 0, sizeof(*ss));
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    snprintf(service, sizeof(service), "%d", port);
    rc = getaddrinfo(host[0] != '\0' ? host : NULL, service, &hints, &res);
    if (rc != 0) {
        if (tcp_resolve_iface(host, port, ss, sslen) == 0)
            return 0;
        snprintf(err, errlen, "cannot resolve '%s': %s (not an interface name either)", host,
                 gai_strerror(rc));
        return -1;
    }
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *sslen = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

void tcp_format_addr(const struct sockaddr *sa, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";

    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host));
        snprintf(buf, len, "%s:%d", host, ntohs(sin->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof(host));
        snprintf(buf, len, "[%s]:%d", host, ntohs(sin6->sin6_port));
    } else {
        snprintf(buf, len, "?");
    }
}

void tcp_set_options(int fd, size_t sockbuf)
{
    int one = 1;

    /* Small frames (headers, the last chunk) must not wait for Nagle. Failures
     * here only cost speed, so they are not errors. */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    if (sockbuf > 0) {
        int size = sockbuf > (1u << 30) ? (1 << 30) : (int)sockbuf;
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
    }
}

/*
 * rdzv_record.c - parse a rendezvous URL (--rendezvous, checked when the
 * settings are validated) and a peer's record, as it reads from a store
 * (untrusted bytes: fuzzed by tests/fuzz/fuzz-text), and format a record.
 */
#include "ring_build.h"

#include <stdio.h>
#include <string.h>

#include "parse.h"
#include "rdzv_record.h"

int ring_rdzv_url_parse(const char *url, ring_rdzv_url_t *u, char *why, size_t len)
{
    memset(u, 0, sizeof(*u));
    if (strncmp(url, "file://", 7) == 0) {
        const char *path = url + 7;
        if (path[0] != '/') {
            snprintf(why, len, "file:// needs an absolute directory, as in file:///shared/dir");
            return -1;
        }
        if (strlen(path) >= sizeof(u->path) - 64) {
            snprintf(why, len, "the directory name is too long");
            return -1;
        }
        u->kind = RING_RDZV_FILE;
        snprintf(u->path, sizeof(u->path), "%s", path);
        return 0;
    }
    if (strncmp(url, "tcp://", 6) == 0) {
        const char *h = url + 6, *colon, *end;
        long port;

        if (h[0] == '[') {
            end = strchr(h, ']');
            if (end == NULL || end[1] != ':') {
                snprintf(why, len, "an IPv6 host needs brackets and a port: tcp://[::1]:29500");
                return -1;
            }
            h++;
            colon = end + 1;
        } else {
            colon = strrchr(h, ':');
            end = colon;
            if (colon == NULL || memchr(h, ':', (size_t)(colon - h)) != NULL) {
                snprintf(why, len, "expected tcp://HOST:PORT (IPv6 as tcp://[ADDR]:PORT)");
                return -1;
            }
        }
        if (end == h || (size_t)(end - h) >= sizeof(u->host)) {
            snprintf(why, len, "the host is empty or too long");
            return -1;
        }
        if (ring_parse_long(colon + 1, &port) != 0 || port < 1 || port > 65535) {
            snprintf(why, len, "the port must be 1..65535");
            return -1;
        }
        u->kind = RING_RDZV_TCP;
        memcpy(u->host, h, (size_t)(end - h));
        u->port = (int)port;
        return 0;
    }
    snprintf(why, len, "expected tcp://HOST:PORT or file:///DIR");
    return -1;
}

void ring_rdzv_record_format(const rdzv_record_t *rec, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "ringd-rendezvous 1\nworld %d\ntransport %s\n"
                                   "nonce %s\nhost %s\ngroup %s\nport %d\n", rec->world,
                                   rec->transport, rec->nonce, rec->host, rec->group, rec->port);
    for (int i = 0; i < rec->naddr && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "addr %s\n", rec->addr[i]);
    if (rec->provisional && used < len)
        snprintf(buf + used, len - used, "provisional 1\n");
}

int ring_rdzv_record_parse(char *text, rdzv_record_t *rec, char *why, size_t len)
{
    char *save = NULL, *line;
    int have = 0;
    long v;

    memset(rec, 0, sizeof(*rec));
    for (line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        char *val = strchr(line, ' ');
        if (val == NULL)
            break;
        *val++ = '\0';
        if (strcmp(line, "ringd-rendezvous") == 0) {
            if (strcmp(val, "1") != 0) {
                snprintf(why, len, "record version %s (this ringd speaks 1)", val);
                return -1;
            }
            have |= 1;
        } else if (strcmp(line, "world") == 0 && ring_parse_long(val, &v) == 0) {
            rec->world = (int)v;
            have |= 2;
        } else if (strcmp(line, "transport") == 0) {
            snprintf(rec->transport, sizeof(rec->transport), "%s", val);
        } else if (strcmp(line, "nonce") == 0) {
            snprintf(rec->nonce, sizeof(rec->nonce), "%s", val);
        } else if (strcmp(line, "host") == 0) {
            snprintf(rec->host, sizeof(rec->host), "%s", val);
            have |= 4;
        } else if (strcmp(line, "group") == 0) {
            snprintf(rec->group, sizeof(rec->group), "%s", val);
        } else if (strcmp(line, "port") == 0 && ring_parse_long(val, &v) == 0 && v > 0 &&
                   v < 65536) {
            rec->port = (int)v;
            have |= 8;
        } else if (strcmp(line, "addr") == 0 && rec->naddr < RDZV_ADDRS) {
            snprintf(rec->addr[rec->naddr++], sizeof(rec->addr[0]), "%s", val);
        } else if (strcmp(line, "provisional") == 0) {
            rec->provisional = strcmp(val, "1") == 0;
        }
    }
    if (have != 15 || rec->naddr == 0) {
        snprintf(why, len, "not a ringd rendezvous record (from another program, or garbled)");
        return -1;
    }
    if (rec->group[0] == '\0')
        snprintf(rec->group, sizeof(rec->group), "%s", rec->host);
    return 0;
}

int ring_rdzv_admit_parse(char *text, rdzv_admit_t *a, char *why, size_t len)
{
    char *save = NULL, *line;
    int have = 0;
    long v;

    memset(a, 0, sizeof(*a));
    for (line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        char *val = strchr(line, ' ');
        if (val == NULL)
            break;
        *val++ = '\0';
        if (strcmp(line, "ringd-admit") == 0) {
            if (strcmp(val, "1") != 0) {
                snprintf(why, len, "admission version %s (this ringd speaks 1)", val);
                return -1;
            }
            have |= 1;
        } else if (strcmp(line, "status") == 0) {
            a->ok = strcmp(val, "ok") == 0;
            have |= a->ok || strcmp(val, "refused") == 0 ? 2 : 0;
        } else if (strcmp(line, "why") == 0) {
            snprintf(a->why, sizeof(a->why), "%s", val);
        } else if (strcmp(line, "generation") == 0 && ring_parse_long(val, &v) == 0 && v > 0 &&
                   v < (1L << 30)) {
            a->generation = (unsigned)v;
            have |= 4;
        } else if (strcmp(line, "world") == 0 && ring_parse_long(val, &v) == 0 && v > 1 &&
                   v <= 65536) {
            a->world = (int)v;
            have |= 8;
        } else if (strcmp(line, "rank") == 0 && ring_parse_long(val, &v) == 0 && v >= 0 &&
                   v < 65536) {
            a->rank = (int)v;
            have |= 16;
        } else if (strcmp(line, "peers") == 0) {
            a->peers = val;
            have |= 32;
        }
    }
    if ((have & 3) != 3 || (a->ok && (have != 63 || a->rank >= a->world))) {
        snprintf(why, len, "not a ringd admission (from another program, or garbled)");
        return -1;
    }
    return 0;
}

int ring_rdzv_admit_format(const rdzv_admit_t *a, char *buf, size_t len)
{
    int n;

    if (!a->ok)
        n = snprintf(buf, len, "ringd-admit 1\nstatus refused\nwhy %s\n", a->why);
    else
        n = snprintf(buf, len, "ringd-admit 1\nstatus ok\ngeneration %u\nworld %d\nrank %d\n"
                     "peers %s\n", a->generation, a->world, a->rank, a->peers);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

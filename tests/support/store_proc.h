/*
 * store_proc.h - the tcp store tests' shared pieces (store_proc.c): sockets
 * on 127.0.0.1, and the job's store in a forked process of its own.
 */
#ifndef RING_STORE_PROC_H
#define RING_STORE_PROC_H

#include <stddef.h>
#include <sys/types.h>

#include <ringd/status.h>

#include "loopback.h"
#include "store.h"

#define SECRET "0123456789abcdef-t-store-avail"
#define JOB "t-store-avail"

typedef struct store_proc {
    pid_t pid;
    int port;
    char err[128];      /* its stderr */
} store_proc_t;

/* Up to len bytes within ms: how many (fewer when the peer closed), or -1 on time. */
long read_some(int fd, unsigned char *p, size_t len, int ms);
/* A port in 20000..32767 that binds on 127.0.0.1 now (another each call), or -1. */
int free_port(void);
/* Lines of the file at path holding needle (NULL: every line); the last one in
 * last (may be NULL). */
int count_lines(const char *path, const char *needle, char *last, size_t last_len);
/* The job's tcp store (world peers; with the secret, or without one), served
 * by a forked process whose stderr goes to sp->err: 0, or -1. */
int store_start(store_proc_t *sp, int world, int secret, const char *tag);
void store_stop(store_proc_t *sp);
/* A client of the store at port (with the secret, or without one). */
ring_status_t client_open(int port, int secret, double within, ring_store_t **s);

#endif

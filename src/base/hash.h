/* hash.h - FNV-1a (hash.c), for hashing settings and peer lists into the
 * hello and a job id into a port: a fingerprint, not a defence. */
#ifndef RING_HASH_H
#define RING_HASH_H

#include <stddef.h>
#include <stdint.h>

#define RING_HASH_INIT 0xcbf29ce484222325ull

uint64_t ring_hash_bytes(uint64_t h, const void *data, size_t len);

#endif /* RING_HASH_H */

/* harness.h - placeholder */
#ifndef RING_HARNESS_H
#define RING_HARNESS_H
int harness_placeholder(void);
#endif

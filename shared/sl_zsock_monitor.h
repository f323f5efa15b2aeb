/* train_monitor: closing a ZeroMQ socket that has a socket monitor.
 *
 * The client (a DEALER per feeder) and the ring (its PULL) watch their
 * sockets with a monitor PAIR to learn at once that a peer's connection
 * closed. Closing them takes an order: stop the monitor, close the socket,
 * then drain the PAIR before closing it, since an event left in its pipe
 * is leaked by libzmq 4.3.
 */
#ifndef TRAIN_MONITOR_H
#define TRAIN_MONITOR_H

/* Close `sock` (may be NULL; its linger as set) and its monitor PAIR `mon`
 * (may be NULL). */
void train_monitor_close(void *sock, void *mon);

#endif

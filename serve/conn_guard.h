/* conn_guard.h: deadlines for minimax-serve's connections (docs/serving.md, "Slow clients").
 *
 * libmicrohttpd's own timeout is one of inactivity: a client that sends a header line every few
 * seconds keeps its connection, and the thread that serves it, for ever. The guard gives each
 * connection a deadline for the phase it is in (its request's headers from the moment it opened
 * or its previous answer was sent, then its body from the end of the headers; none while the
 * answer is computed and sent), and a reaper thread shuts down the socket of a connection past
 * its deadline: libmicrohttpd then sees the connection end and closes it, as when a client
 * leaves. */
#pragma once

typedef struct mt_guard mt_guard;
typedef struct mt_guard_conn mt_guard_conn;

/* A guard with these limits in seconds (> 0), its reaper thread started. */
mt_guard *mt_guard_start(int header_s, int body_s);
/* Stops the reaper and frees the guard (the connections must be closed: mt_guard_close). */
void mt_guard_stop(mt_guard *g);

/* A connection opened on socket fd: its headers are due within header_s. */
mt_guard_conn *mt_guard_open(mt_guard *g, int fd);
/* The connection is closing (before its socket is closed: the reaper never touches it again). */
void mt_guard_close(mt_guard *g, mt_guard_conn *c);
/* Its request's headers are in: the body is due within body_s. */
void mt_guard_headers_done(mt_guard *g, mt_guard_conn *c);
/* Its request is in: no deadline while the answer is computed and sent. */
void mt_guard_body_done(mt_guard *g, mt_guard_conn *c);
/* Its answer is sent: the next request's headers are due within header_s. */
void mt_guard_answered(mt_guard *g, mt_guard_conn *c);
/* Connections cut at a deadline so far. */
long mt_guard_cut_count(mt_guard *g);

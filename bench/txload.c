/* A load generator for requests redis-benchmark cannot send: a run of several commands as
 * one request (MULTI ... EXEC), whose reply has a fixed length.
 *
 *     txload PORT CLIENTS PIPELINE REQUESTS REQUEST_FILE REPLY_FILE
 *
 * CLIENTS connections to 127.0.0.1:PORT each send PIPELINE copies of the request (the bytes of
 * REQUEST_FILE) at once, read until PIPELINE replies came back, and go again until REQUESTS
 * requests were answered in all; prints the requests per second (as redis-benchmark's --csv
 * does: "name","rps"). One thread, epoll, as redis-benchmark's own loop: the client costs the
 * same whichever server answers. Every reply must be the bytes of REPLY_FILE (a server
 * answering anything else is an error, exit 2). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    int fd;
    size_t want;    /* reply bytes still due for the batch in flight */
    size_t got;     /* reply bytes of the batch read so far */
    long batch;     /* requests in the batch in flight */
} conn_t;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int send_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) {   /* the kernel's buffer is full: wait a little */
                struct timespec ts = {0, 100000};
                nanosleep(&ts, NULL);
                continue;
            }
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: txload PORT CLIENTS PIPELINE REQUESTS REQUEST_FILE REPLY_FILE\n");
        return 1;
    }
    int port = atoi(argv[1]), clients = atoi(argv[2]), pipeline = atoi(argv[3]);
    long total = atol(argv[4]);
    static char one[65536], expect[65536];
    FILE *f = fopen(argv[5], "rb"), *g = fopen(argv[6], "rb");
    if (!f || !g || clients < 1 || pipeline < 1 || total < 1) {
        fprintf(stderr, "txload: bad arguments\n");
        return 1;
    }
    size_t len = fread(one, 1, sizeof one, f), reply = fread(expect, 1, sizeof expect, g);
    fclose(f);
    fclose(g);
    if (len == 0 || reply == 0) {
        fprintf(stderr, "txload: an empty request or reply file\n");
        return 1;
    }
    char *batch = malloc(len * (size_t)pipeline);
    for (int i = 0; i < pipeline; i++) memcpy(batch + len * (size_t)i, one, len);
    size_t rbufsize = reply * (size_t)pipeline + 65536;
    char *rbuf = malloc(rbufsize);

    int ep = epoll_create1(0);
    conn_t *cs = calloc((size_t)clients, sizeof *cs);
    long sent = 0, done = 0;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    for (int i = 0; i < clients; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        int one_ = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one_, sizeof one_);
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
            perror("txload: connect");
            return 1;
        }
        cs[i].fd = fd;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &cs[i]};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    }
    double t0 = now();
    for (int i = 0; i < clients && sent < total; i++) {
        long b = total - sent < pipeline ? total - sent : pipeline;
        cs[i].batch = b;
        cs[i].want = reply * (size_t)b;
        cs[i].got = 0;
        sent += b;
        if (send_all(cs[i].fd, batch, len * (size_t)b) < 0) { perror("txload: write"); return 1; }
    }
    struct epoll_event evs[256];
    while (done < total) {
        int n = epoll_wait(ep, evs, 256, 10000);
        if (n == 0) { fprintf(stderr, "txload: no reply in 10 s\n"); return 1; }
        for (int k = 0; k < n; k++) {
            conn_t *c = evs[k].data.ptr;
            ssize_t r = read(c->fd, rbuf, rbufsize);
            if (r <= 0) {
                if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
                fprintf(stderr, "txload: the server closed a connection\n");
                return 1;
            }
            if (c->got + (size_t)r > c->want) {
                fprintf(stderr, "txload: more reply bytes than requests sent\n");
                return 2;
            }
            for (ssize_t j = 0; j < r; j++)   /* (replies arrive split anywhere) */
                if (rbuf[j] != expect[(c->got + (size_t)j) % reply]) {
                    fprintf(stderr, "txload: a reply differs from the expected one\n");
                    return 2;
                }
            c->got += (size_t)r;
            if (c->got < c->want) continue;
            done += c->batch;
            if (sent < total) {
                long b = total - sent < pipeline ? total - sent : pipeline;
                c->batch = b;
                c->want = reply * (size_t)b;
                c->got = 0;
                sent += b;
                if (send_all(c->fd, batch, len * (size_t)b) < 0) { perror("txload: write"); return 1; }
            }
        }
    }
    double dt = now() - t0;
    printf("\"TX\",\"%.2f\"\n", (double)total / dt);
    return 0;
}

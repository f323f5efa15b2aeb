/* sto_opt: the command-line rows that set a program's remote sources
 * (struct sto_config), the same words in every program that reads data
 * files: sluice-feeder, and later the tools. `member` is the struct
 * sto_config field of the program's options struct `type`; after parsing,
 * the program passes it to sto_configure (which checks what the rows'
 * bounds cannot: backoff at most backoff max).
 */
#ifndef STO_OPT_H
#define STO_OPT_H

#include <stddef.h>

#include "sl_opt.h"
#include "sto.h"

#define STO_OFF(type, member, f) (offsetof(type, member) + offsetof(struct sto_config, f))

/* clang-format off */
#define STO_OPT_ROWS(type, member)                                                                                   \
    {"remote-connect-timeout-ms", 0, SL_OPT_LONG, STO_OFF(type, member, connect_timeout_ms), 1, 86400000, "10000",   \
     "N", "http(s):// and s3:// files: a connection not made in N ms is a failure, retried", NULL, NULL},             \
    {"remote-stall-timeout-ms", 0, SL_OPT_LONG, STO_OFF(type, member, stall_timeout_ms), 1, 86400000, "30000", "N",  \
     "remote files: a transfer that receives no byte for N ms is a failure, retried", NULL, NULL},                    \
    {"remote-retries", 0, SL_OPT_INT, STO_OFF(type, member, max_retries), 0, 100, "5", "N",                          \
     "remote files: retries of a request after a timeout, a reset, a cut body or a 5xx, each resuming where the "     \
     "last stopped (4xx: none)", NULL, NULL},                                                                         \
    {"remote-backoff-ms", 0, SL_OPT_LONG, STO_OFF(type, member, backoff_ms), 0, 86400000, "100", "N",                \
     "remote files: the first retry's delay, doubled at each retry, +-50% at random", NULL, NULL},                   \
    {"remote-backoff-max-ms", 0, SL_OPT_LONG, STO_OFF(type, member, backoff_max_ms), 0, 86400000, "10000", "N",      \
     "remote files: the longest delay before a retry", NULL, NULL},                                                  \
    {"remote-redirects", 0, SL_OPT_INT, STO_OFF(type, member, max_redirects), 0, 50, "5", "N",                       \
     "remote files: redirects followed per request", NULL, NULL},                                                    \
    {"remote-cross-host-redirects", 0, SL_OPT_FLAG, STO_OFF(type, member, cross_host_redirects), 0, 0, NULL, NULL,   \
     "remote files: follow a redirect to another host (refused by default)", NULL, NULL},                            \
    {"remote-ca-file", 0, SL_OPT_STRING, STO_OFF(type, member, ca_file), 0, 0, NULL, "FILE",                         \
     "remote files: also trust the CA certificates in FILE (PEM) for https://", NULL, NULL},                         \
    {"s3-endpoint", 0, SL_OPT_STRING, STO_OFF(type, member, s3_endpoint), 0, 0, NULL, "URL",                         \
     "s3:// files: the server (default $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, else AWS's for the region)", NULL,   \
     NULL},                                                                                                           \
    {"s3-region", 0, SL_OPT_STRING, STO_OFF(type, member, s3_region), 0, 0, NULL, "NAME",                            \
     "s3:// files: the region requests are signed for (default $AWS_REGION, $AWS_DEFAULT_REGION, else us-east-1)",   \
     NULL, NULL},                                                                                                     \
    {"s3-path-style", 0, SL_OPT_FLAG, STO_OFF(type, member, s3_path_style), 0, 0, NULL, NULL,                        \
     "s3:// files: address objects as ENDPOINT/BUCKET/KEY (S3-compatible servers) rather than BUCKET.ENDPOINT/KEY",  \
     NULL, NULL}
/* clang-format on */

#endif

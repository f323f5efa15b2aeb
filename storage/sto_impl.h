/* sto_impl: what the storage backends share (not for callers above
 * storage/). Each backend's ops table, and the process-wide configuration.
 */
#ifndef STO_IMPL_H
#define STO_IMPL_H

#include "sto.h"

extern const struct sto_ops sto_file_ops;
extern const struct sto_ops sto_http_ops; /* http:// and https:// */
extern const struct sto_ops sto_s3_ops;

/* The configuration sto_configure set (the defaults before it). */
const struct sto_config *sto__config(void);

#endif

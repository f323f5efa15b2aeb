#!/usr/bin/env bash
# The job's CURVE keys for the Kubernetes recipe (docs/deploy.md,
# "Kubernetes"; docs/security.md): made once with sluice-feeder keygen and
# handed to the cluster, never written into a manifest.
#
#   deploy/kubernetes/sluice-keys.sh [KUBECTL OPTIONS...]   (e.g. -n my-namespace)
#
# creates
#   Secret    sluice-feeder-key    feeder.key   the feeders' secret key
#   Secret    sluice-trainer-key   trainer.key  the workers' secret key (one
#                                               pair for every worker: the
#                                               ring needs it)
#   ConfigMap sluice-public-keys   feeder.pub, trainer.pub
# which sluice-feeders.yaml and sluice-trainers.yaml mount. Two Secrets, so
# that RBAC can let a feeder's pods read only the feeder's key. The keys are
# made in a private temporary folder (mode 0700), removed at the end: the
# secret keys then exist only in the cluster. Fails, changing nothing more,
# if one of the three already exists (delete them to make new keys; the
# pods read the keys when they start).
#
# Settings: SLUICE_FEEDER, the sluice-feeder to run (default: the one on
# PATH); KUBECTL (default kubectl).
set -euo pipefail
feeder=${SLUICE_FEEDER:-sluice-feeder}
kubectl=${KUBECTL:-kubectl}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
(cd "$d" && "$feeder" keygen feeder >/dev/null && "$feeder" keygen trainer >/dev/null)
"$kubectl" "$@" create secret generic sluice-feeder-key --from-file=feeder.key="$d/feeder.key"
"$kubectl" "$@" create secret generic sluice-trainer-key --from-file=trainer.key="$d/trainer.key"
"$kubectl" "$@" create configmap sluice-public-keys --from-file=feeder.pub="$d/feeder.pub" \
    --from-file=trainer.pub="$d/trainer.pub"
echo "sluice-keys.sh: Secrets sluice-feeder-key and sluice-trainer-key, ConfigMap sluice-public-keys created"

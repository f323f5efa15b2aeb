#!/usr/bin/env bash
# The C plan (plan_dump) against the Python model (ref_plan.py) on random
# configs covering every policy, hint, split and option: the plan iterated
# from the start, and each piece as a fresh plan gives it right after
# feed_plan_seek to its seq (plan_dump --seek, which also checks the rest
# of that epoch against iteration). Then the transition streams of a change
# of the shape mid-epoch (feed_transition.h) against transition_pieces on
# random jobs, old and new shapes, epochs and steps of the change, iterated
# and after a seek to every seq (CASES / 4 of them). Stops at the first
# difference, showing the config and the first differing lines.
# Usage: test_plan_ref.sh PATH/TO/plan_dump [CASES] [SEED]
set -euo pipefail
dump=${1:?usage: test_plan_ref.sh PATH/TO/plan_dump [CASES] [SEED]}
cases=${2:-400}
seed=${3:-20240611}
here=$(cd "$(dirname "$0")" && pwd)

exec python3 - "$dump" "$cases" "$seed" "$here" <<'EOF'
import json
import random
import subprocess
import sys

dump, cases, seed, here = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
sys.path.insert(0, here)
import ref_plan  # noqa: E402

rng = random.Random(seed)


def config():
    W = rng.randint(1, 4)
    R = rng.randint(1, 3)
    nfiles = rng.choice([0] + [rng.randint(1, 8) for _ in range(7)])
    if rng.random() < 0.7:
        nfiles = max(nfiles, W)  # keep FILE errors the exception
    counts = [rng.choice([0, rng.randint(0, 40), rng.randint(0, 40), rng.randint(0, 8)]) for _ in range(nfiles)]
    cfg = {
        "counts": counts,
        "source_is_files": rng.choice([1, 1, 1, 0]),
        "policy": rng.choice(["auto", "off", "file", "data", "hint"]),
        "hint": rng.choice(["files", "records", "batches"]),
        "G": rng.randint(1, 12),
        "drop_remainder": rng.randint(0, 1),
        "shuffle_buffer": rng.choice([0, 0, 1, rng.randint(2, 10), rng.randint(10, 200)]),
        "seed": str(rng.getrandbits(64)) if rng.random() < 0.5 else rng.randint(0, 1000),
        "reshuffle": rng.randint(0, 1),
        "epochs": rng.choice([1, 2, 3, 0]),
        "forever_epochs": 2,
        "parallel_reads": rng.randint(0, 3),
        "per_replica": 1 if rng.random() < 0.2 else 0,
        "pr_shard": rng.choice(["none", "files", "records"]),
        "W": W,
        "R": R,
    }
    if cfg["per_replica"] and rng.random() < 0.85:
        cfg["G"] = W * R * rng.randint(1, 4)
    return cfg


def transition_config():
    """A job and a change of its shape mid-epoch that both shapes can plan
    (None when the draw cannot have one)."""
    cfg = config()
    cfg["from_W"], cfg["from_R"] = cfg["W"], cfg["R"]
    cfg["W"], cfg["R"] = rng.randint(1, 4), rng.randint(1, 3)
    if cfg["per_replica"] and rng.random() < 0.85:
        cfg["G"] = cfg["W"] * cfg["R"] * cfg["from_W"] * cfg["from_R"] * rng.randint(1, 2)
    norm = ref_plan.normalize(cfg)
    try:
        T = ref_plan.epoch_steps(dict(norm, W=cfg["from_W"], R=cfg["from_R"]))
        ref_plan.epoch_steps(norm)
    except ref_plan.PlanError:
        return None
    if T < 2:
        return None
    epochs = cfg["epochs"] or cfg["forever_epochs"]
    cfg["from_epoch"] = rng.randrange(epochs)
    cfg["from_step"] = rng.randint(1, T - 1)
    return cfg


passed = 0
kinds = {}
runs = [(False, config()) for _ in range(cases)]
ntrans = max(1, cases // 4)
while len(runs) < cases + ntrans:
    cfg = transition_config()
    if cfg is not None:
        runs.append((True, cfg))
for i, (trans, cfg) in enumerate(runs):
    text = json.dumps(cfg)
    want = "".join(line + "\n" for line in ref_plan.run(text))
    for mode in ([], ["--seek"]):
        res = subprocess.run([dump] + mode + [text], capture_output=True, text=True)
        if res.returncode != 0 or res.stdout != want:
            break
    if res.returncode != 0 or res.stdout != want:
        print("case %d: C%s and Python differ (rc %d)\nconfig: %s" % (
            i, " (each piece right after a seek to it)" if mode else "", res.returncode, text))
        if res.stderr:
            print("stderr:", res.stderr.strip())
        got_lines, want_lines = res.stdout.splitlines(), want.splitlines()
        for j in range(max(len(got_lines), len(want_lines))):
            g = got_lines[j] if j < len(got_lines) else "<none>"
            w = want_lines[j] if j < len(want_lines) else "<none>"
            if g != w:
                print("line %d\n  C:      %s\n  Python: %s" % (j + 1, g, w))
                break
        print("%d passed, 1 failed" % passed)
        sys.exit(1)
    kind = "error" if want.startswith('{"error"') else (
        "per-replica" if cfg["per_replica"] else cfg["policy"])
    if trans:
        kind = "transition " + kind
    kinds[kind] = kinds.get(kind, 0) + 1
    passed += 1
print("by kind: " + ", ".join("%s %d" % kv for kv in sorted(kinds.items())))
print("%d passed, 0 failed" % passed)
EOF

#!/usr/bin/env python3
"""libsluice's /metrics (sluice_options.metrics_listen, issue #29 item 4)
under the public C API, as the sanitizer builds run it (they have no
Python package, so python/tests/test_metrics.py cannot run there).

A real sluice-feeder serves a job of 2 epochs; tests/client_metrics reads
its whole stream while a second thread scrapes /metrics without pause,
then scrapes once more after the end. That last exposition must hold the
exact counts (steps, samples, pieces, epochs, the step histograms'
counts), the job's labels and sluice_process_info{program="client"}.

Usage: test_client_metrics.py BUILD_DIR     (prints "N passed, 0 failed")
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bed  # noqa: E402
import harness  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402


def main():
    bed.setup(sys.argv[1], "client-metrics")
    files = bed.gen("d", 160, 2)
    _, job = bed.write_job("job-cm", files, epochs=2, global_batch_size=8)
    steps = 2 * 160 // 8
    harness.case()
    tag = "cm"
    ep = "ipc://%s/%s.sock" % (bed.TMP, tag)
    feeder = spawn([bed.FEEDER, "--job", os.path.join(bed.TMP, "job-cm.json"), "--listen", ep, "--threads", "1",
                    "--heartbeat-ms", "200"], log=bed.log_path(tag, "feeder"))
    bed.wait_for_log(tag, "feeder", "serving job", feeder, "the feeder did not start")
    prog = os.path.join(bed.BUILD, "tests", "client_metrics")
    client = spawn([prog, ep, job["name"]], log=bed.log_path(tag, "client-stderr"),
                   stdout=open(bed.log_path(tag, "client"), "w"))
    code = bed.wait(client, 60, "client_metrics")
    out = bed.read_log(tag, "client")
    if code != 0:
        fail("client_metrics exited %d: %s" % (code, bed.read_log(tag, "client-stderr")))
    head, _, answer = out.partition("\n")
    info = json.loads(head)
    if not re.fullmatch(r"127\.0\.0\.1:[1-9][0-9]*", info["address"]) or info["steps"] != steps or \
            info["rows"] != steps * 8 or info["scrapes"] < 1:
        fail("client_metrics: %r" % info)
    labels = 'sluice_job="job-cm",worker="0"'
    for line in ('sluice_process_info{%s,program="client",version="0.1.0"} 1' % labels,
                 "sluice_trainer_steps_total{%s} %d" % (labels, steps),
                 "sluice_trainer_samples_total{%s} %d" % (labels, steps * 8),
                 "sluice_trainer_pieces_total{%s} %d" % (labels, steps),
                 "sluice_trainer_epochs_total{%s} 2" % labels,
                 "sluice_trainer_step_input_wait_seconds_count{%s} %d" % (labels, steps),
                 "sluice_trainer_step_seconds_count{%s} %d" % (labels, steps - 1),
                 "sluice_trainer_feeder_rejoins_total{%s} 0" % labels):
        if "\n" + line + "\n" not in answer:
            fail("the last scrape lacks %r:\n%s" % (line, answer[-3000:]))
    if not re.search(r'\nsluice_trainer_input_wait_by_feeder_seconds_total\{%s,feeder="0"\} [0-9.]+\n' % labels,
                     answer):
        fail("no input wait by feeder 0:\n%s" % answer[-3000:])
    ok("a C client's /metrics, scraped %d times while it read: %d steps, %d samples, 2 epochs exact after the end"
       % (info["scrapes"], steps, steps * 8))
    fcode = bed.wait(feeder, 30, "the feeder")
    if fcode != 0:
        fail("the feeder exited %d" % fcode)
    bed.finish()


if __name__ == "__main__":
    try:
        main()
    finally:
        bed.cleanup()

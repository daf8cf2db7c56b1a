"""A grown finished run made live for a bench: what nothing else here can make at 4,096 ranks.

``python bench/live_run.py RUN [--heartbeat-s 10]`` makes ``RUN`` live in place and keeps its
node digests fresh until interrupted (what :func:`made_live` and :data:`HEARTBEAT` do).

A real live run of 4,096 ranks cannot run on this machine, so a grown finished run
(``grow_run.py``) is made to look like one, faking the narrowest thing: its ``state.json`` and
every status say ``running`` (no end, no owner pids to judge), its ``digest.json`` is gone (the
finalizer has not run), and each of its nodes has the digest its writer would keep
(``nodes/sNN/node-HOST.json``): every rank of the node running at the run's last step, with the
source digest's figures (loss, step time, telemetry, Flight Recorder progress) of the source
rank it was grown from. :data:`HEARTBEAT` (run as ``python -c``) then rewrites every digest as
its writer would, every heartbeat, its ranks' newest step stamped then, so that none turns stale
and no rank looks silent while the bench reads.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
from pathlib import Path

from runtime.rundir import RunDir

OWNER = ("supervisor_pid", "supervisor_start_ticks", "launcher_pid", "launcher_start_ticks")
HEARTBEAT_S = 10.0  # the writer's default: an unchanged digest is rewritten this often

HEARTBEAT = """
import json, os, sys, time
every, paths = float(sys.argv[1]), sys.argv[2:]
held = {path: json.load(open(path)) for path in paths}
while True:
    for path, data in held.items():
        now = time.time()
        data["written"] = now
        for entry in data["ranks"].values():
            entry["t"] = now
            if "step" in entry:  # its ranks step on: none looks silent
                entry["step"]["time"] = now
        with open(path + ".tmp", "w") as fh:
            json.dump(data, fh)
        os.replace(path + ".tmp", path)
    time.sleep(every)
"""


def _running(path: Path) -> None:
    data = json.loads(path.read_text())
    data["state"] = "running"
    for key in ("end", "exit_code", "signal", "signal_name", *OWNER):
        data.pop(key, None)
    path.write_text(json.dumps(data))


def made_live(run: Path, heartbeat_s: float = HEARTBEAT_S) -> list[Path]:
    """Make the grown finished ``run`` live in place (see the module); its node digests."""
    rundir = RunDir(run)
    template: dict[int, dict] = {}
    for path in rundir.node_digests():  # the source's, copied as they are by grow_run
        data = json.loads(path.read_text())
        template.update({int(k): v for k, v in data["ranks"].items()})
        path.unlink()
    rundir.digest_json.unlink(missing_ok=True)
    _running(rundir.state_json)
    nodes: dict[str, dict[int, dict]] = {}
    now = time.time()
    for status in sorted(run.glob("status/**/rank-*.json")):
        _running(status)
        data = json.loads(status.read_text())
        rank, host = data["rank"], data.get("host") or "?"
        entry = copy.deepcopy(template[rank % len(template)]) if template else {}
        entry.update(t=now, pid=data.get("pid"), state={"state": "running"})
        if "step" in entry:
            entry["step"]["time"] = now
        nodes.setdefault(host, {})[rank] = entry
    digests = []
    for host, ranks in nodes.items():
        path = rundir.node_digest(host)
        path.parent.mkdir(parents=True, exist_ok=True)
        first = min(ranks)
        digest = {
            "format": 1,
            "host": host,
            "written": now,
            "writer": {"rank": first, "pid": ranks[first].get("pid")},
            "interval_s": 2.0,
            "heartbeat_s": heartbeat_s,
            "ranks": {str(r): e for r, e in sorted(ranks.items())},
        }
        path.write_text(json.dumps(digest))
        digests.append(path)
    return digests


def heartbeat_argv(python: str, digests: list[Path], every_s: float = HEARTBEAT_S) -> list[str]:
    """The command that keeps ``digests`` fresh (:data:`HEARTBEAT`)."""
    return [python, "-c", HEARTBEAT, str(every_s), *map(str, digests)]


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--heartbeat-s", type=float, default=HEARTBEAT_S)
    args = parser.parse_args()
    digests = made_live(args.run, args.heartbeat_s)
    print(f"{args.run}: live, {len(digests)} node digests; kept fresh until interrupted")
    os.execv(sys.executable, heartbeat_argv(sys.executable, digests, args.heartbeat_s))


if __name__ == "__main__":
    sys.exit(main())

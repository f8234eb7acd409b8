"""Load generation for bench/service.py: wrk, driven by service_wrk.lua.

:func:`run_wrk` sends a prepared request list once (each wrk thread its share, on keep-alive
connections), then interrupts wrk; it returns what was sent and answered, the rate over the time
the requests ran and wrk's latency percentiles. wrk is Debian's ``wrk`` package (``apt-get install
-y wrk``; ``brew install wrk`` on macOS; or build https://github.com/wg/wrk).
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from service_servers import BenchError

LUA_SCRIPT = Path(__file__).resolve().parent / "service_wrk.lua"
REQUEST_TIMEOUT_S = 30.0
INSTALL_HINT = (
    "wrk is not installed: `apt-get install -y wrk` (Debian, Ubuntu), `brew install wrk` "
    "(macOS), or build it from https://github.com/wg/wrk; `make bench-service` installs it "
    "with apt-get when it is missing"
)

# (method, path, body) or (method, path, body, header): an empty body means none; the header
# ("Name: value") is the request's own, over the phase's headers (a learner's Authorization, a
# browser's Cookie).
Spec = tuple[str, ...]


def find_wrk(path: str | None = None) -> str:
    """The wrk executable (``path`` or on PATH); BenchError saying how to get it otherwise."""
    found = shutil.which(path or "wrk")
    if found is None:
        raise BenchError(INSTALL_HINT if path is None else f"{path}: not an executable wrk")
    return found


@dataclass
class Load:
    """What one load run sent and got back."""

    sent: list[Spec]  # the requests written, in order
    responses: int
    non_200: int
    errors: int  # transport errors and timeouts: no response
    seconds: float  # first request sent to last response received
    p50_ms: float
    p99_ms: float
    client_cpu_s: float | None
    problems: Counter[str] = field(default_factory=Counter)  # non-200 statuses and errors

    @property
    def unanswered(self) -> int:
        return max(0, len(self.sent) - self.responses)


def run_wrk(
    wrk: str,
    url: str,
    headers: dict[str, str],
    specs: list[Spec],
    concurrency: int,
    max_seconds: float,
    workdir: Path,
    expect_status: int = 200,
) -> Load:
    """Send ``specs`` with wrk: each thread sends its share once, then wrk is interrupted; a
    response other than ``expect_status`` is counted (``non_200``) with its status."""
    threads = max(1, min(os.cpu_count() or 1, concurrency, len(specs)))
    connections = max(threads, concurrency - concurrency % threads)
    script, spec_file = LUA_SCRIPT, workdir / "requests.tsv"
    spec_file.write_text(
        "".join("\t".join((*spec, "")[:4]) + "\n" for spec in specs), encoding="utf-8"
    )
    out_file = workdir / "wrk.out"
    cmd = [wrk, "-t", str(threads), "-c", str(connections), "-d", f"{max(1, round(max_seconds))}s"]
    cmd += ["--timeout", f"{int(REQUEST_TIMEOUT_S)}s", "-s", str(script)]
    for name, value in headers.items():
        cmd += ["-H", f"{name}: {value}"]
    cmd += [url, "--", str(spec_file), str(threads), str(expect_status)]

    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with out_file.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, text=True)
    stderr_lines: list[str] = []

    def watch_stderr() -> None:
        assert proc.stderr is not None
        finished = 0
        for line in proc.stderr:
            if line.strip() == "bench-thread-done":
                finished += 1
                if finished == threads:
                    threading.Thread(target=interrupt, daemon=True).start()
            else:
                stderr_lines.append(line)

    def interrupt() -> None:
        # Until wrk installs its SIGINT handler (just after starting its threads) the signal
        # is ignored, so repeat it until wrk exits.
        while proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.5)

    watcher = threading.Thread(target=watch_stderr, daemon=True)
    watcher.start()
    try:
        proc.wait(timeout=max_seconds + 30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise BenchError("wrk did not finish in time") from None
    watcher.join(timeout=5)
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)

    output = out_file.read_text(encoding="utf-8", errors="replace")
    line = next((x for x in output.splitlines() if x.startswith("BENCH_RESULT ")), None)
    if proc.returncode != 0 or line is None:
        raise BenchError(
            f"wrk failed (status {proc.returncode}):\n{output}{''.join(stderr_lines)}".strip()
        )
    result = json.loads(line.removeprefix("BENCH_RESULT "))

    sent: list[Spec] = []
    base, extra = divmod(len(specs), threads)
    for index, thread in enumerate(result["threads"]):
        first = index * base + min(index, extra)
        sent += specs[first : first + thread["sent"]]
    threads_out = result["threads"]
    responses = sum(t["received"] for t in threads_out)
    non_200 = sum(t["non200"] for t in threads_out)
    resent = sum(t["resent"] for t in threads_out)
    active = [t for t in threads_out if t["received"]]
    seconds = (
        (max(t["last_us"] for t in active) - min(t["first_us"] for t in active)) / 1e6
        if active
        else 0.0
    )
    cpu = (cpu_after.ru_utime + cpu_after.ru_stime) - (cpu_before.ru_utime + cpu_before.ru_stime)
    # Requests written and never answered: lost with a dropped connection (each was followed
    # by a resend), or still in flight when the time cap stopped wrk.
    unanswered = max(0, len(sent) + resent - responses)
    problems: Counter[str] = Counter()
    if unanswered:
        problems["no response (wrk: dropped connection, timeout or time cap)"] = unanswered
    if resent:
        problems["resent after a dropped connection (wrk)"] = resent
    if result["socket_errors"]:
        problems["connect/read/write errors (wrk)"] = result["socket_errors"]
    for status in " ".join(t.get("statuses", "") for t in threads_out).split():
        problems[f"HTTP {status}"] += 1
    return Load(
        sent=sent,
        responses=responses,
        non_200=non_200,
        errors=unanswered,
        problems=problems,
        seconds=seconds,
        p50_ms=result["p50_us"] / 1e3,
        p99_ms=result["p99_us"] / 1e3,
        client_cpu_s=cpu,
    )

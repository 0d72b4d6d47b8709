"""Class 15: a Dask scheduler address that answers wrongly ends within a stated timeout, with
one line and exit code 2 (issue #32, item 10).

The bad schedulers are real sockets: one that accepts and never speaks, a tiny HTTP server
(http.server), a listener whose accept queue is full (the kernel drops the connection attempt,
as a black-hole address does), a closed port, and 10.255.255.1 (what it does depends on the
network: on a machine without one a proxy may answer HTTP; elsewhere it is a black hole). A real
Dask `LocalCluster` gives the good scheduler and a worker's address (a Dask server that is not
a scheduler). Every case runs under a time limit well above `--scheduler-timeout`.
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time

import pytest

from kinema_nodes.core.errors import KinemaError

from corpus import assert_cli_refusal, assert_one_line, run_cli, within

pytest.importorskip("distributed")

#: The --scheduler-timeout the cases use, and how long past it a case may take (process start,
#: importing Dask and loading the robot are in the CLI cases' time too).
TIMEOUT_S = 2.0
SLACK_S = 25.0


@pytest.fixture
def silent_scheduler():
    """A socket that accepts every connection and never says a word."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held, stop = [], threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join(5)
    for connection in held:
        connection.close()
    server.close()


@pytest.fixture
def http_scheduler():
    """An HTTP server: it answers, in a protocol Dask reads as frame lengths."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _QuietHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # the test's output is not the server's log
        pass


@pytest.fixture
def black_hole():
    """A listener with a full accept queue: the kernel drops further SYNs, so a connection
    attempt waits with no answer at all, as it does to an address that drops everything."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    address = server.getsockname()
    fillers = []
    for _ in range(8):  # fill the queue: these connect (or hang) and are never accepted
        filler = socket.socket()
        filler.setblocking(False)
        try:
            filler.connect(address)
        except (BlockingIOError, OSError):
            pass
        fillers.append(filler)
    time.sleep(0.2)
    yield f"tcp://127.0.0.1:{address[1]}"
    for filler in fillers:
        filler.close()
    server.close()


@pytest.fixture
def closed_port():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return f"tcp://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def cluster():
    """A real Dask LocalCluster: one single-threaded worker process."""
    import distributed

    local = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                                     silence_logs=50)
    yield local
    local.close()


def _ask(address: str, timeout: float = TIMEOUT_S):
    from kinema_nodes.cli.batch import ask_scheduler

    started = time.monotonic()
    answer, error = within(timeout + SLACK_S, f"asking {address}", lambda: ask_scheduler(address, timeout))
    return answer, error, time.monotonic() - started


# ---- the question itself (the API under `within`) -------------------------------------------------

@pytest.mark.parametrize("kind", ["silent", "black_hole"])
def test_a_scheduler_that_never_answers_times_out_in_time(request, kind):
    address = request.getfixturevalue({"silent": "silent_scheduler", "black_hole": "black_hole"}[kind])
    _, error, seconds = _ask(address)
    assert isinstance(error, KinemaError), error
    assert_one_line(error, "no dask scheduler answered within 2 s", "--scheduler-timeout")
    assert seconds < TIMEOUT_S + 3


def test_an_http_server_is_not_a_scheduler(http_scheduler):
    _, error, seconds = _ask(http_scheduler)
    assert isinstance(error, KinemaError), error
    assert_one_line(error, http_scheduler)
    assert seconds < TIMEOUT_S + 3


def test_a_closed_port_is_refused_in_time(closed_port):
    _, error, seconds = _ask(closed_port)
    assert isinstance(error, KinemaError), error
    assert_one_line(error, closed_port)
    assert seconds < TIMEOUT_S + 3


@pytest.mark.parametrize("address, fragment", [
    ("http://127.0.0.1:8786", "not a dask address"),
    ("tcp://", "--scheduler"),
    ("tcp://127.0.0.1:99999", "--scheduler"),
    ("nonsense-without-port", "--scheduler"),
])
def test_an_address_that_is_not_one_is_refused(address, fragment):
    _, error, seconds = _ask(address)
    assert isinstance(error, KinemaError), error
    assert_one_line(error, fragment)
    assert seconds < TIMEOUT_S + 3


def test_a_dask_worker_is_not_a_scheduler(cluster):
    worker = next(iter(cluster.scheduler_info["workers"]))
    _, error, _ = _ask(worker)
    assert isinstance(error, KinemaError), error
    assert_one_line(error, "answered as worker", "not as a dask scheduler")


def test_a_real_scheduler_answers_and_runs_work(cluster):
    from types import SimpleNamespace

    from kinema_nodes.cli.batch import open_client

    answer, error, _ = _ask(cluster.scheduler_address)
    assert error is None and answer["type"] == "Scheduler"
    arguments = SimpleNamespace(scheduler=cluster.scheduler_address, workers=None, scheduler_timeout=TIMEOUT_S)
    with open_client(arguments) as client:
        assert client.submit(sum, [1, 2, 3]).result(timeout=60) == 6


# ---- through the command line: exit 2, one line, in time ---------------------------------------

def _reach(address: str, *extra: str):
    started = time.monotonic()
    result = run_cli("reach", "arm6", "--step", "0.5", "--orientations", "1", "--scheduler", address,
                     "--scheduler-timeout", str(TIMEOUT_S), *extra, timeout=TIMEOUT_S + 60)
    return result, time.monotonic() - started


@pytest.mark.parametrize("kind", ["silent_scheduler", "http_scheduler", "black_hole"])
def test_reach_on_a_wrong_scheduler_exits_2_in_time(request, kind):
    address = request.getfixturevalue(kind)
    result, seconds = _reach(address)
    assert_cli_refusal(result, "--scheduler", address)
    assert seconds < TIMEOUT_S + SLACK_S


def test_reach_on_the_black_hole_address_exits_2_in_time():
    """10.255.255.1: unroutable on most networks; here perhaps a proxy that answers HTTP."""
    result, seconds = _reach("tcp://10.255.255.1:8786")
    assert_cli_refusal(result, "--scheduler", "10.255.255.1")
    assert seconds < TIMEOUT_S + SLACK_S


def test_batch_on_a_silent_scheduler_exits_2_in_time(tmp_path, silent_scheduler):
    (tmp_path / "targets.csv").write_text("frame,x,y,z,qw,qx,qy,qz\n1,0.4,0.1,0.4,0,1,0,0\n")
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps([{"robot": "arm6", "targets": "targets.csv", "out": "a.blend"}]))
    started = time.monotonic()
    result = run_cli("batch", manifest, "--scheduler", silent_scheduler, "--scheduler-timeout", str(TIMEOUT_S),
                     timeout=TIMEOUT_S + 60)
    assert_cli_refusal(result, "no dask scheduler answered within 2 s")
    assert time.monotonic() - started < TIMEOUT_S + SLACK_S
    assert not (tmp_path / "a.blend").exists()


@pytest.mark.parametrize("value", ["nan", "0", "-1", "1e9"])
def test_a_timeout_that_is_not_one_is_refused(value, silent_scheduler):
    result = run_cli("reach", "arm6", "--scheduler", silent_scheduler, "--scheduler-timeout", value, timeout=60)
    assert_cli_refusal(result, "--scheduler-timeout")

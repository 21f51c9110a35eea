"""A harness's numbers are untrusted input (D8, D9), through a real `tlxdb optimize`: far more
samples than asked are capped with a warning and the run goes on; a declared size beyond 64 bits
is recorded as given and never fails a view or a report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.bundles import kernel_copy, sleep_bundle
from support.cli import small_optimize

from cli.main import main
from tlxstore.events import BenchmarkSampled
from tlxstore.store import Store

RETURNED = 5_000  # samples the harness returns, whatever a call asks for (2: a window's calls)
# the sleep harness's samples, RETURNED of them, and a bytes_moved no 64-bit column holds
GREEDY = f"""
_fixed_benchmark = benchmark


def benchmark(artifact, case, repetitions):
    reply = _fixed_benchmark(artifact, case, repetitions)
    t = reply["samples_us"][0]
    samples = [t * (1.0 + 0.002 * (i % 5)) for i in range({RETURNED})]
    return {{**reply, "samples_us": samples, "bytes_moved": 2**70}}
"""


@pytest.fixture(scope="module")
def greedy_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("greedy")
    bundle = sleep_bundle(tmp / "bundle", sleep_s=0, harness_append=GREEDY)
    store = tmp / "s.duckdb"
    r = CliRunner().invoke(
        main, small_optimize(kernel_copy(tmp / "src"), bundle, store, tmp / "out")
    )
    return r, store, tmp


def _sampled(store: Path) -> list[BenchmarkSampled]:
    s = Store(store)
    (run_id,) = s.run_ids()
    return [e.event for e in s.run_envelopes(run_id) if isinstance(e.event, BenchmarkSampled)]


@pytest.mark.slow
def test_far_more_samples_than_asked_are_capped_with_a_warning_and_the_run_goes_on(greedy_run):
    """D9: 2,000,000 samples where 5 were asked crashed the run (a 29.8 GiB bootstrap) and grew
    its log to 60 MB."""
    r, store, tmp = greedy_run
    assert r.exit_code in (0, 2), r.output
    assert json.loads(r.stdout)["stopping_reason"] == "max_rounds"
    sampled = _sampled(store)
    assert sampled and all(len(e.samples_us) == 1000 for e in sampled)
    assert (
        "WARNING: the harness returned more samples than the 2 asked; tlxdb keeps the first "
        "1000 at most" in r.stderr
    )
    assert (tmp / "out" / "events.jsonl").stat().st_size < 2_000_000


@pytest.mark.slow
def test_a_declared_size_beyond_64_bits_is_kept_and_fails_no_view(greedy_run):
    """D8: bytes_moved = 2**70 made `throughput` and `report` fail for good ("Could not convert
    string ... to INT64")."""
    r, store, tmp = greedy_run
    assert r.exit_code in (0, 2), r.output
    assert {e.bytes_moved for e in _sampled(store)} == {2**70}  # recorded as it was given
    run_id = json.loads(r.stdout)["run_id"]
    q = CliRunner().invoke(
        main,
        ["query", "SELECT bytes_moved FROM throughput", "--store", str(store), "--format", "json"],
    )
    assert q.exit_code == 0, q.output
    assert {row["bytes_moved"] for row in json.loads(q.stdout)} <= {None}
    for args in (
        ["report", run_id, "--to", str(tmp / "report")],
        ["query", "SELECT * FROM rooflines"],
    ):
        out = CliRunner().invoke(main, [*args, "--store", str(store)])
        assert out.exit_code == 0, out.output

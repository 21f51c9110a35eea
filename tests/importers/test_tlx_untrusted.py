"""A TLX agent folder is untrusted input: `tlxdb import` (and `optimize --prior-run`) checks it at
the boundary (ranges, ids, files read only from the folder itself) and refuses it in one line
naming the experiment and field, with nothing written; the store stays usable after any refusal."""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.bundles import kernel_copy, vecadd_bundle
from support.cli import TLXDB, one_error_line, small_optimize

from cli.main import main
from tlxstore.events import DecisionMade, Outcome
from tlxstore.store import Store

FIXTURE = Path(__file__).parent / "fixtures" / "tlx_run"
GOOD_RUN = "tlx-1cc52188e9ca4c6a"  # the fixture's run id


def tlx(*args: str):
    return CliRunner().invoke(main, list(args))


def folder_with(tmp: Path, copies: int = 0, edit=None, name: str = "tlx") -> Path:
    """The fixture folder with `copies` more experiments (its three non-baseline experiments
    copied under new ids x0000...), then `edit(items)` applied to experiments.json's list."""
    dest = Path(shutil.copytree(FIXTURE, tmp / name))
    items = json.loads((dest / "experiments.json").read_text())
    for i in range(copies):
        src = items[1 + i % 3]
        new = {**json.loads(json.dumps(src)), "experiment_id": f"x{i:04d}"}
        (dest / "experiments" / new["experiment_id"]).mkdir()
        shutil.copy(
            dest / "experiments" / src["experiment_id"] / "kernel.py",
            dest / "experiments" / new["experiment_id"] / "kernel.py",
        )
        items.append(new)
    if edit is not None:
        edit(items)
    (dest / "experiments.json").write_text(json.dumps(items))
    return dest


def good_store(tmp: Path) -> Path:
    """A store holding one good run (the fixture, imported)."""
    store = tmp / "s.duckdb"
    r = tlx("import", str(FIXTURE), "--store", str(store))
    assert r.exit_code == 0, r.output
    return store


def assert_store_still_works(store: Path, tmp: Path) -> None:
    """Every command that reads the store answers, and only the good run is in it."""
    r = tlx("runs", "--store", str(store), "--format", "json")
    assert r.exit_code == 0, r.output
    assert [row["run_id"] for row in json.loads(r.stdout)] == [GOOD_RUN]
    r = tlx("query", "SELECT count(*) AS n FROM candidates", "--store", str(store))
    assert r.exit_code == 0, r.output
    r = tlx("report", GOOD_RUN, "--store", str(store), "--to", str(tmp / "report"))
    assert r.exit_code == 0, r.output
    r = tlx("push", "--store", str(store), "--to", str(tmp / "other.duckdb"))
    assert r.exit_code == 0, r.output


def _huge_round(items):
    items[-1]["round_index"] = 2**31


@pytest.mark.parametrize("copies", [250, 5], ids=["over 1000 events", "under 1000 events"])
def test_a_round_beyond_the_stores_range_is_refused_naming_the_experiment(tmp_path, copies):
    """C1: ~250 experiments (over 1,000 events) and one round_index of 2**31 wedged the store
    for good; under 1,000 events the import rolled back with a traceback."""
    store = good_store(tmp_path)
    folder = folder_with(tmp_path, copies, _huge_round)
    line = one_error_line(tlx("import", str(folder), "--store", str(store)))
    assert line == (
        f"{folder / 'experiments.json'}: experiment x{copies - 1:04d}: round_index must be at "
        "most 2147483647, got 2147483648"
    )
    assert_store_still_works(store, tmp_path)


def test_optimize_with_such_a_prior_run_is_refused_and_the_store_still_works(tmp_path):
    """C1 through `optimize --prior-run` on a store that held good runs."""
    store = good_store(tmp_path)
    folder = folder_with(tmp_path, 250, _huge_round)
    kernel, bundle = kernel_copy(tmp_path / "src"), vecadd_bundle(tmp_path / "bundle")
    args = small_optimize(kernel, bundle, store, tmp_path / "out")
    r = tlx(*args, "--prior-run", str(folder))
    assert "round_index must be at most 2147483647" in one_error_line(r)
    assert_store_still_works(store, tmp_path)


def test_an_experiment_id_given_twice_is_refused(tmp_path):
    """D7: two experiments with one id gave two rows for one run and a winner's speedup taken
    from its rejected twin."""
    twin = None

    def edit(items):
        nonlocal twin
        twin = {**items[1], "status": "rejected", "performance": {"aggregate_speedup": 0.5}}
        items.append(twin)

    folder = folder_with(tmp_path, 0, edit)
    store = good_store(tmp_path)
    line = one_error_line(tlx("import", str(folder), "--store", str(store)))
    assert line == (
        f"{folder / 'experiments.json'}: experiment r001-c000 appears twice (experiments 1 and 4); "
        "an experiment id names one experiment"
    )
    assert_store_still_works(store, tmp_path)


def test_a_case_with_more_samples_than_tlxdb_keeps_is_refused(tmp_path):
    def edit(items):
        items[1]["performance"]["cases"][0]["timing"]["samples_us"] = [8.0] * 1_001

    folder = folder_with(tmp_path, 0, edit)
    line = one_error_line(tlx("import", str(folder), "--store", str(tmp_path / "s.duckdb")))
    assert line.endswith(
        "experiment r001-c000: performance.cases[0].timing.samples_us must be at most 1000 "
        "samples, got 1001"
    )


def _kernel(folder: Path, exp_id: str = "r001-c000") -> Path:
    return folder / "experiments" / exp_id / "kernel.py"


@pytest.mark.parametrize("what", ["kernel.py", "its folder", "experiments.json"])
def test_a_symlink_in_the_folder_is_refused_and_nothing_is_stored(tmp_path, what):
    """D5: a kernel.py that was a symlink to any file was stored as source (and could be pushed
    to the team store)."""
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET\n")
    folder = folder_with(tmp_path)
    if what == "kernel.py":
        link = _kernel(folder)
        link.unlink()
        link.symlink_to(secret)
    elif what == "its folder":
        link = _kernel(folder).parent
        shutil.rmtree(link)
        (tmp_path / "elsewhere").mkdir()
        shutil.copy(secret, tmp_path / "elsewhere" / "kernel.py")
        link.symlink_to(tmp_path / "elsewhere")
    else:
        link = folder / "experiments.json"
        shutil.move(link, tmp_path / "exp.json")
        link.symlink_to(tmp_path / "exp.json")
    store = tmp_path / "s.duckdb"
    line = one_error_line(tlx("import", str(folder), "--store", str(store)))
    assert line == f"{link} is a symlink; tlxdb reads an imported folder's own files only"
    assert not store.exists() or Store(store).run_ids() == []


def test_a_kernel_file_that_is_a_fifo_is_refused_without_hanging(tmp_path):
    folder = folder_with(tmp_path)
    _kernel(folder).unlink()
    os.mkfifo(_kernel(folder))
    line = one_error_line(tlx("import", str(folder), "--store", str(tmp_path / "s.duckdb")))
    assert line == f"{_kernel(folder)} is not a regular file"


def test_deeply_nested_experiments_json_is_one_line(tmp_path):
    folder = folder_with(tmp_path)
    (folder / "experiments.json").write_text("[" * 100_000 + "]" * 100_000)
    line = one_error_line(tlx("import", str(folder), "--store", str(tmp_path / "s.duckdb")))
    assert line == (
        f"{folder / 'experiments.json'} nests deeper than 64 levels; tlxdb does not read it"
    )


def _decision(store: Path, candidate_id: str) -> DecisionMade:
    s = Store(store)
    (run_id,) = s.run_ids()
    (d,) = [
        e.event
        for e in s.run_envelopes(run_id)
        if isinstance(e.event, DecisionMade) and e.event.candidate_id == candidate_id
    ]
    return d


def test_a_promotion_that_was_no_speedup_imports_as_rejected_with_its_speedup(tmp_path):
    """An experiment "promoted" with aggregate_speedup 0.2 stayed promoted."""
    folder = folder_with(
        tmp_path, 0, lambda items: items[1]["performance"].update(aggregate_speedup=0.2)
    )
    store = tmp_path / "s.duckdb"
    assert tlx("import", str(folder), "--store", str(store)).exit_code == 0
    d = _decision(store, "r001-c000")
    assert (d.outcome, d.speedup) == (Outcome.REJECTED, 0.2)
    assert d.reason == (
        "TLX agent status promoted, contradicted by its evidence: aggregate_speedup 0.2 is not "
        "above 1"
    )


def test_a_negative_speedup_is_refused_not_dropped(tmp_path):
    """aggregate_speedup -5 became NULL."""
    folder = folder_with(
        tmp_path, 0, lambda items: items[2]["performance"].update(aggregate_speedup=-5)
    )
    line = one_error_line(tlx("import", str(folder), "--store", str(tmp_path / "s.duckdb")))
    assert line == (
        f"{folder / 'experiments.json'}: experiment r001-c001: aggregate_speedup must be a "
        "positive number, got -5"
    )


def test_report_never_writes_where_an_imported_run_says(tmp_path, monkeypatch):
    """D3: a TLX folder whose result.json named another folder as output_dir: `tlxdb report RUN`
    (no --to) replaced that folder's report.md and report.html."""
    victim = tmp_path / "victim"
    victim.mkdir()
    for name in ("report.md", "report.html"):
        (victim / name).write_text("mine\n")
    folder = folder_with(tmp_path)
    result = json.loads((folder / "result.json").read_text())
    result.pop("artifacts_dir")
    (folder / "result.json").write_text(json.dumps({**result, "output_dir": str(victim)}))
    store = tmp_path / "s.duckdb"
    r = tlx("import", str(folder), "--store", str(store))
    assert r.exit_code == 0, r.output
    (run_id,) = json.loads(r.stdout)["paths"][0]["runs"]
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    r = tlx("report", run_id, "--store", str(store))
    assert r.exit_code == 0, r.output
    assert (here / "report.md").is_file() and str(here / "report.md") in r.stdout
    assert [(victim / n).read_text() for n in ("report.md", "report.html")] == ["mine\n"] * 2


def _on_a_terminal(*args: str) -> str:
    """What `tlxdb ARGS` prints with its stdout on a terminal (a pseudo-terminal)."""
    main_fd, sub_fd = pty.openpty()
    proc = subprocess.Popen([TLXDB, *args], stdout=sub_fd, stderr=subprocess.PIPE)
    os.close(sub_fd)
    out = b""
    while True:
        try:
            chunk = os.read(main_fd, 65536)
        except OSError:  # the terminal's other side closed
            break
        if not chunk:
            break
        out += chunk
    os.close(main_fd)
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    return out.decode(errors="replace")


def test_show_and_query_escape_imported_control_codes_on_a_terminal(tmp_path):
    """`show` and `query` printed an imported hypothesis's terminal escape codes as they were
    (a retitled window, a cleared screen)."""
    hostile = "faster\x1b]0;pwned\x07\x1b[2J"
    folder = folder_with(tmp_path, 0, lambda items: items[1].update(hypothesis=hostile))
    store = tmp_path / "s.duckdb"
    assert tlx("import", str(folder), "--store", str(store)).exit_code == 0
    (run_id,) = Store(store).run_ids()
    sql = "SELECT hypothesis FROM candidates WHERE candidate_id = 'r001-c000'"
    for args in (["show", run_id], ["query", sql]):
        shown = _on_a_terminal(*args, "--store", str(store))
        assert "\x1b" not in shown and "\x07" not in shown, args
        assert "faster\\x1b]0;pwned\\x07\\x1b[2J" in shown, args
    piped = tlx("query", sql, "--store", str(store), "--format", "csv")
    # a pipe or a file gets the text unescaped (click.echo drops the CSI sequence \x1b[2J there)
    assert "faster\x1b]0;pwned\x07" in piped.stdout


def test_a_zero_speedup_is_the_placeholder_of_an_experiment_without_one(tmp_path):
    """The TLX agent (and tlxdb's own TLX writer) write aggregate_speedup 0.0 for an experiment
    with no speedup: it imports as none; "promoted" with 0.0 is contradicted by its evidence."""
    folder = folder_with(
        tmp_path, 0, lambda items: items[2]["performance"].update(aggregate_speedup=0.0)
    )
    store = tmp_path / "s.duckdb"
    assert tlx("import", str(folder), "--store", str(store)).exit_code == 0
    assert _decision(store, "r001-c001").speedup is None
    promoted = folder_with(
        tmp_path / "p", 0, lambda items: items[1]["performance"].update(aggregate_speedup=0.0)
    )
    store2 = tmp_path / "s2.duckdb"
    assert tlx("import", str(promoted), "--store", str(store2)).exit_code == 0
    assert _decision(store2, "r001-c000").outcome == Outcome.REJECTED

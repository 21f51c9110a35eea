"""`tlxdb optimize | validate | show | report | replay` through the real CLI (CliRunner) against
real DuckDB files in tmp_path, with the vecadd bundle on the Triton interpreter."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.bundles import (  # noqa: E402
    KERNEL,
    VECADD_CASES,
    kernel_copy,
    sleep_bundle,
    vecadd_bundle,
)
from support.cli import one_error_line  # noqa: E402
from support.repos import git, kernel_in_git  # noqa: E402
from support.scripted_provider import set_block  # noqa: E402

from cli.main import main  # noqa: E402
from tlxstore.store import Store  # noqa: E402

FAST = [
    "--benchmark-repetitions",
    "8",
    "--max-cv",
    "5",
    "--max-candidate-seconds",
    "60",
    "--no-commit-winner",
]


def _invoke(args: list[str]):
    return CliRunner().invoke(main, args, catch_exceptions=False)


def _args(
    tmp: Path, bundle: Path | None = None, kernel: Path | None = None, extra: list[str] = ()
) -> list[str]:
    bundle = bundle or vecadd_bundle(tmp / "bundle")
    kernel = kernel or kernel_copy(tmp / "src")
    return [
        "optimize",
        "--kernel",
        str(kernel),
        "--bundle",
        str(bundle),
        "--store",
        str(tmp / "s.duckdb"),
        "--output-dir",
        str(tmp / "out"),
        *FAST,
        *extra,
    ]


def _scripted_args(
    tmp: Path, rounds: int, cases: list = VECADD_CASES, kernel: Path | None = None
) -> list[str]:
    """_args for a run of the scripted provider, one candidate a round, on the sleep bundle:
    samples fixed by BLOCK_SIZE, so its decisions hold however busy the machine is."""
    bundle = sleep_bundle(tmp / "bundle", sleep_s=0, cases=cases)
    scripted = [
        "--provider",
        "scripted",
        "--max-rounds",
        str(rounds),
        "--candidates-per-round",
        "1",
    ]
    return _args(tmp, bundle=bundle, kernel=kernel, extra=scripted)


@pytest.mark.slow
def test_optimize_prints_the_result_and_show_report_replay_read_it_back(tmp_path, scripted):
    scripted.append(set_block(256))
    r = _invoke(_scripted_args(tmp_path, rounds=1))
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["winner_id"] == "c001" and out["success"] and out["stopping_reason"] == "max_rounds"
    assert out["speedup"] > 1 and out["ci_low"] > 1 and out["commit"] is None
    assert [c["case_id"] for c in out["baseline"]] == ["n2048", "n1000"] and out["final"][0][
        "median_us"
    ] > 0
    assert json.loads((tmp_path / "out" / "result.json").read_text()) == out
    err = r.stderr
    assert "c001 (round 1, parent baseline) hypothesis: fewer, wider programs" in err
    assert "change: BLOCK_SIZE=256 | expected: lower median | risk: low" in err
    assert "c001 verify n2048 (attempt 1): correct" in err
    assert re.search(
        r"\n  n2048: [\d.]+ us vs [\d.]+ us baseline \([\d.]+x\), CV [\d.]+ / [\d.]+, 8 / 8 samples",
        err,
    )
    assert re.search(
        r"baseline n2048: median [\d.]+ us, p95 [\d.]+ us, CV [\d.]+ \(8 samples\)", err
    )
    assert "c001 PROMOTED: speedup" in err and "c001 survived final revalidation" in err
    assert (
        "c001 profile n2048: time in add_kernel; harness.kernel_time_us=" in err
        and "vs baseline)" in err
    )
    assert list((tmp_path / "out" / "experiments" / "c001" / "profile").rglob("profile.json"))
    assert "def add_kernel" not in err and "tl.store" not in err  # kernel source is never printed
    # no NVML on the CPU interpreter: said once for the run, and no machine state is recorded
    said = [ln for ln in err.splitlines() if "NVML is unavailable on this target" in ln]
    assert len(said) == 1 and said[0].startswith(
        "environment: NVML is unavailable on this target: the Triton interpreter runs kernels on "
        "the CPU; no clocks, throttling, neighbours or host cost are recorded in this run"
    )
    events = (tmp_path / "out" / "events.jsonl").read_text()
    assert '"type":"MachineSampled"' not in events and '"type":"RunEnvironment"' in events

    run_id = out["run_id"]
    shown = _invoke(["show", run_id[:12], "--store", str(tmp_path / "s.duckdb")])
    assert (
        shown.exit_code == 0
        and "c001 PROMOTED" in shown.stdout
        and "run finished: max_rounds" in shown.stdout
        and "(timings measure the Triton interpreter on the CPU, not a GPU)" in shown.stdout
    )

    rep = _invoke(
        ["report", run_id, "--store", str(tmp_path / "s.duckdb"), "--to", str(tmp_path / "rep")]
    )
    assert rep.exit_code == 0
    md, html = (tmp_path / "rep" / "report.md"), (tmp_path / "rep" / "report.html")
    assert rep.stdout.split()[:2] == [str(md), str(html)]
    assert "| c001 | 1 | baseline |" in md.read_text()
    assert "not a GPU" in md.read_text()
    assert "## Environment" in md.read_text() and "NVML is unavailable" in md.read_text()
    assert html.read_text().count("<svg") == 3  # best so far, per-case speedups, samples

    same = _invoke(["replay", run_id, "--store", str(tmp_path / "s.duckdb")])
    assert (
        same.exit_code == 0 and "  c001       recorded promoted  replayed promoted" in same.stdout
    )
    strict = _invoke(
        [
            "replay",
            run_id,
            "--store",
            str(tmp_path / "s.duckdb"),
            "--min-speedup",
            "1000",
            "--format",
            "json",
        ]
    )
    replayed = json.loads(strict.stdout)
    assert replayed["decisions"][0]["replayed"] == "rejected" and replayed["replayed_best"] is None
    assert replayed["recorded_best"] == "c001"
    endless = _invoke(["replay", run_id, "--store", str(tmp_path / "s.duckdb"), "--max-cv", "inf"])
    assert endless.exit_code == 1
    assert endless.stderr.strip() == "Error: --max-cv must be a finite number, got inf"


@pytest.mark.slow
def test_a_run_without_a_winner_exits_2_and_summary_is_short(tmp_path, scripted):
    r = _invoke(_args(tmp_path, extra=["--provider", "scripted", "--result-format", "summary"]))
    assert r.exit_code == 2, r.stderr
    out = json.loads(r.stdout)
    assert (
        out["stopping_reason"] == "search_exhausted"
        and out["winner_id"] is None
        and out["experiments"] == 0
    )
    assert "baseline" not in out


def _fails(args: list[str], message: str, tmp: Path) -> None:
    r = _invoke(args)
    assert r.exit_code == 1
    assert r.stderr.strip().splitlines()[-1] == f"Error: {message}"
    assert not (tmp / "out").exists()  # nothing half-written
    assert not (tmp / "s.duckdb").exists() or Store(tmp / "s.duckdb").run_ids() == []


def test_a_missing_kernel_is_refused(tmp_path):
    _fails(
        _args(tmp_path, kernel=tmp_path / "nope.py"),
        f"kernel not found at {tmp_path / 'nope.py'}",
        tmp_path,
    )


@pytest.mark.parametrize("commit", [["--no-commit-winner"], []])
def test_a_kernel_that_is_a_directory_is_refused_as_one(tmp_path, commit):
    folder = kernel_copy(tmp_path / "src").parent
    args = [a for a in _args(tmp_path, kernel=folder) if a != "--no-commit-winner"] + commit
    _fails(args, f"kernel {folder} is a directory; give --kernel one Python file", tmp_path)


def test_the_tlx_intra_kernel_proton_flag_is_accepted_and_says_what_is_not_collected(tmp_path):
    args = _args(tmp_path, kernel=tmp_path / "nope.py", extra=["--diagnostic-proton-intra-kernel"])
    r = _invoke(args)
    assert r.exit_code == 1  # the flag itself is no error; the missing kernel is
    first = r.stderr.strip().splitlines()[0]
    assert first.startswith("note: --diagnostic-proton-intra-kernel is accepted")
    assert "not intra-kernel timelines" in first
    plain = [a for a in args if a != "--diagnostic-proton-intra-kernel"]
    assert "note:" not in _invoke(plain).stderr


def test_a_flag_that_budget_json_disagrees_with_gets_a_note_saying_which_wins(tmp_path):
    bundle = vecadd_bundle(tmp_path / "bundle", budget={"max_rounds": 12, "max_cv": 0.5})
    args = _args(tmp_path, bundle=bundle, kernel=tmp_path / "nope.py", extra=["--max-rounds", "3"])
    lines = _invoke(args).stderr.strip().splitlines()
    notes = [line for line in lines if line.startswith("note:")]
    tail = "give the file with --budget for it to win"
    assert notes == [  # found in the bundle folder: the flags typed win
        f"note: --max-rounds 3 overrides the bundle's budget.json (max_rounds 12); {tail}",
        f"note: --max-cv 5 overrides the bundle's budget.json (max_cv 0.5); {tail}",  # FAST's
    ]
    given = _invoke([*args, "--budget", str(bundle / "budget.json")]).stderr.splitlines()
    assert [line for line in given if line.startswith("note:")] == [  # --budget: the file wins
        "note: --max-rounds 3 is overridden by budget.json (max_rounds 12)",
        "note: --max-cv 5 is overridden by budget.json (max_cv 0.5)",
    ]
    same = _args(tmp_path, bundle=bundle, kernel=tmp_path / "nope.py", extra=["--max-rounds", "12"])
    assert "--max-rounds" not in _invoke(same).stderr  # the same value: nothing to say


def test_a_kernel_with_a_syntax_error_is_refused(tmp_path):
    k = kernel_copy(tmp_path / "src", "def add(:\n")
    _fails(
        _args(tmp_path, kernel=k),
        "kernel vecadd_kernel.py has a syntax error at line 1: invalid syntax",
        tmp_path,
    )


@pytest.mark.parametrize(
    ("file", "content", "message"),
    [
        ("cases.json", {"case_id": "a"}, "cases.json: must be a list of cases, got a JSON dict"),
        (
            "cases.json",
            [{"case_id": "a"}, {"case_id": "a"}],
            "cases.json: [1].case_id: duplicate case_id 'a'",
        ),
        (
            "cases.json",
            [{"case_id": ""}],
            'cases.json: [0].case_id: string should have at least 1 character (got "")',
        ),
        (
            "cases.json",
            [{"case_id": "a", "weight": -1}],
            "cases.json: [0].weight: input should be greater than 0 (got -1)",
        ),
        (
            "target.json",
            {"backend": "tpu"},
            "target.json: backend: input should be 'cuda', 'hip' or 'cpu' (got \"tpu\")",
        ),
        (
            "budget.json",
            {"max_rounds": 0},
            "budget.json: max_rounds: input should be greater than 0 (got 0)",
        ),
        (
            "budget.json",
            {"min_speedup": 0.5},
            "budget.json: min_speedup: input should be greater than or equal to 1 (got 0.5)",
        ),
        (
            "budget.json",
            {"max_cv": -0.1},
            "budget.json: max_cv: input should be greater than or equal to 0 (got -0.1)",
        ),
    ],
)
def test_bad_bundle_files_are_refused_naming_file_and_field(tmp_path, file, content, message):
    bundle = vecadd_bundle(tmp_path / "bundle")
    (bundle / file).write_text(json.dumps(content))
    _fails(_args(tmp_path, bundle=bundle), message, tmp_path)


def test_an_unreadable_bundle_file_is_refused(tmp_path):
    bundle = vecadd_bundle(tmp_path / "bundle")
    (bundle / "target.json").write_bytes(b"\xff\xfe{")
    r = _invoke(_args(tmp_path, bundle=bundle))
    assert r.exit_code == 1 and r.stderr.startswith(
        f"Error: cannot read target.json at {bundle / 'target.json'}: "
    )


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--max-cv", "-0.1", "--max-cv must not be negative (got -0.1)"),
        ("--max-total-seconds", "0", "--max-total-seconds must be greater than 0 (got 0.0)"),
    ],
)
def test_a_negative_max_cv_or_a_non_positive_budget_flag_is_refused(tmp_path, flag, value, message):
    _fails(_args(tmp_path, extra=[flag, value]), message, tmp_path)


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--max-total-seconds", "inf"),
        ("--max-total-seconds", "nan"),
        ("--max-candidate-seconds", "inf"),
        ("--min-speedup", "nan"),
        ("--max-cv", "-inf"),
    ],
)
def test_a_flag_that_is_not_a_finite_number_is_refused_naming_it(tmp_path, flag, value):
    _fails(
        _args(tmp_path, extra=[flag, value]),
        f"{flag} must be a finite number, got {value}",
        tmp_path,
    )


def test_validate_refuses_a_flag_that_is_not_a_finite_number(tmp_path):
    bundle, kernel = vecadd_bundle(tmp_path / "bundle"), kernel_copy(tmp_path / "src")
    r = _invoke(
        ["validate", "--kernel", str(kernel), "--bundle", str(bundle)]
        + ["--max-total-seconds", "inf"]
    )
    assert r.exit_code == 1
    assert r.stderr.strip() == "Error: --max-total-seconds must be a finite number, got inf"


def test_an_invalid_flag_is_refused_even_where_budget_json_overrides_it(tmp_path):
    bundle = vecadd_bundle(tmp_path / "bundle", budget={"max_total_seconds": 30, "max_rounds": 1})
    _fails(
        _args(tmp_path, bundle=bundle, extra=["--max-total-seconds", "-5"]),
        "--max-total-seconds must be greater than 0 (got -5.0)",
        tmp_path,
    )
    r = _invoke(_args(tmp_path, bundle=bundle, extra=["--max-total-seconds", "-5"]))
    assert "note:" not in r.stderr  # refused, not "overridden by budget.json"


def test_an_arch_that_does_not_match_the_device_is_refused(tmp_path):
    import platform

    _fails(
        _args(tmp_path, extra=["--arch", "sm_90"]),
        f"--arch sm_90 expects sm_9x, but the device (cpu-interpreter) is {platform.machine()}",
        tmp_path,
    )


def test_an_unknown_provider_is_refused(tmp_path):
    _fails(
        _args(tmp_path, extra=["--provider", "oracle"]),
        "unknown provider 'oracle'; choose one of: command, llm, remeasure, tune",
        tmp_path,
    )


def test_an_output_folder_in_use_is_refused(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    r = _invoke(_args(tmp_path))
    assert r.exit_code == 1
    assert (
        r.stderr.strip()
        == f"Error: output folder {tmp_path / 'out'} is not empty; choose another --output-dir"
    )
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["keep.txt"]


def test_resuming_an_unknown_run_names_the_next_step(tmp_path):
    r = _invoke(["optimize", "--resume", "r2099", "--store", str(tmp_path / "s.duckdb")])
    assert r.exit_code == 1
    assert (
        r.stderr.strip()
        == f"Error: no run 'r2099' in store {tmp_path / 's.duckdb'}; list runs with `tlxdb runs`"
    )


HARNESS_CASES = [
    ("\ndel verify\n", "bundle validation failed (harness): harness.py: harness.py lacks verify"),
    (
        "\ndel build, benchmark\n",
        "bundle validation failed (harness): harness.py: harness.py lacks build, benchmark",
    ),
    (
        "\nraise RuntimeError('no GPU here')\n",
        "bundle validation failed (harness): harness.py: importing harness.py raised: RuntimeError: no GPU here",
    ),
    (
        "\ndef benchmark(artifact, case, repetitions):\n    return [0.0] * repetitions\n",
        "bundle validation failed (baseline:samples): the harness benchmark failed on case n2048: "
        "benchmark sample 0 is 0.0 us; samples must be positive",
    ),
    (
        "\ndef benchmark(artifact, case, repetitions):\n    return [-3.0] * repetitions\n",
        "bundle validation failed (baseline:samples): the harness benchmark failed on case n2048: "
        "benchmark sample 0 is -3.0 us; samples must be positive",
    ),
    (
        "\ndef benchmark(artifact, case, repetitions):\n    return [float('nan')] * repetitions\n",
        "bundle validation failed (baseline:samples): the harness benchmark failed on case n2048: "
        "benchmark sample 0 is nan, not a finite number of microseconds",
    ),
    (
        "\ndef benchmark(artifact, case, repetitions):\n    return []\n",
        "bundle validation failed (baseline:samples): the harness benchmark failed on case n2048: "
        "benchmark returned no samples",
    ),
    (
        "\ndef build(kernel_source, target):\n    raise RuntimeError('nvcc not found')\n",
        "bundle validation failed (baseline:build): RuntimeError: nvcc not found",
    ),
    (
        "\ndef verify(artifact, case):\n"
        "    return {'passed': False, 'diagnostics': 'max_abs_error=1.0'}\n",
        "bundle validation failed (baseline:verify): protected case n2048 failed verification: "
        "max_abs_error=1.0",
    ),
]


@pytest.mark.parametrize(("append", "message"), HARNESS_CASES)
def test_a_broken_harness_is_refused_with_the_reason(tmp_path, append, message):
    _fails(
        _args(tmp_path, bundle=vecadd_bundle(tmp_path / "bundle", harness_append=append)),
        message,
        tmp_path,
    )


ACCEPTS_BROKEN_BUILDS = """
_build = build


def build(kernel_source, target):
    try:
        return _build(kernel_source, target)
    except SyntaxError:
        return {"lenient": True}


_verify = verify


def verify(artifact, case):
    return True if isinstance(artifact, dict) else _verify(artifact, case)
"""


@pytest.mark.slow
def test_a_bundle_that_builds_a_broken_source_is_refused(tmp_path):
    bundle = vecadd_bundle(tmp_path / "bundle", harness_append=ACCEPTS_BROKEN_BUILDS)
    _fails(
        _args(tmp_path, bundle=bundle),
        "bundle validation failed (negative:unbuildable): build() accepted a source with a syntax error: "
        "it cannot tell a broken kernel",
        tmp_path,
    )


@pytest.mark.slow
def test_a_bundle_that_accepts_a_wrong_answer_is_refused(tmp_path):
    bundle = vecadd_bundle(
        tmp_path / "bundle", harness_append="\ndef verify(artifact, case):\n    return True\n"
    )
    _fails(
        _args(tmp_path, bundle=bundle),
        "bundle validation failed (negative:wrong_output): verify() accepted a kernel whose results are "
        "NaN: it can pass a wrong kernel",
        tmp_path,
    )


@pytest.mark.slow
def test_validate_prints_a_pass_fail_table(tmp_path):
    r = _invoke(
        [
            "validate",
            "--kernel",
            str(kernel_copy(tmp_path / "src")),
            "--bundle",
            str(vecadd_bundle(tmp_path / "bundle")),
            "--max-cv",
            "5",
            "--benchmark-repetitions",
            "5",
        ]
    )
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("device: cpu-interpreter (cpu, ")
    assert [ln.split()[:2] for ln in lines[1:]] == [
        ["PASS", "cases:protected"],
        ["PASS", "harness"],
        ["PASS", "baseline:build"],
        ["PASS", "baseline:verify"],
        ["PASS", "baseline:samples"],
        ["PASS", "baseline:attribution"],
        ["PASS", "baseline:profile"],
        ["PASS", "harness:fresh_build"],
        ["PASS", "negative:unbuildable"],
        ["PASS", "negative:wrong_output"],
        ["PASS", "negative:wrong_answer"],
    ]
    assert "time attributed to add_kernel" in r.stdout


CHOOSY_BUILD = """

_known_build = build


def build(kernel_source, target):
    if "_tlxdb_spoil_module" in kernel_source:
        raise ValueError("this harness builds only the kernels it knows")
    return _known_build(kernel_source, target)
"""


@pytest.mark.slow
def test_a_negative_check_whose_mutant_does_not_build_warns_and_says_why(tmp_path):
    bundle = vecadd_bundle(tmp_path / "bundle", harness_append=CHOOSY_BUILD)
    r = _invoke(["validate", "--kernel", str(KERNEL), "--bundle", str(bundle), "--max-cv", "5"])
    assert r.exit_code == 0, r.output
    assert (
        "WARN  negative:wrong_output  inconclusive: the kernel with spoiled results did not build "
        "(ValueError: this harness builds only the kernels it knows)"
    ) in r.stdout


def test_validate_fails_with_exit_1_and_the_failing_check(tmp_path):
    bundle = vecadd_bundle(tmp_path / "bundle", harness_append="\ndel verify\n")
    r = _invoke(["validate", "--kernel", str(KERNEL), "--bundle", str(bundle)])
    assert r.exit_code == 1
    assert ["FAIL", "harness", "harness.py:", "harness.py", "lacks", "verify"] in [
        ln.split() for ln in r.stdout.splitlines()
    ]
    assert (
        r.stderr.strip()
        == "Error: validation failed (harness); the bundle cannot protect an optimization"
    )


DO_BENCH = """

import triton.testing


def benchmark(artifact, case, repetitions):
    x, y = _inputs(case)
    ms = triton.testing.do_bench(lambda: artifact.add(x, y), quantiles=[0.5, 0.2, 0.8])
    return {"samples_us": [t * 1000 for t in ms], "warmup_count": 1, "cache_policy": "none"}
"""


def test_a_harness_timed_with_do_bench_validates_on_the_interpreter(tmp_path):
    """A harness timed with triton.testing.do_bench, as most GPU harnesses are, met Triton's
    'RuntimeError: 0 active drivers' on the CPU interpreter and could not run on a CPU machine:
    the harness child times do_bench on the CPU clock there (optimizer.evaluation.interpreter)."""
    bundle = vecadd_bundle(tmp_path / "bundle", harness_append=DO_BENCH)
    r = _invoke(["validate", "--kernel", str(KERNEL), "--bundle", str(bundle)])
    assert r.exit_code == 0, r.output
    checks = {ln.split()[1]: ln.split()[0] for ln in r.stdout.splitlines()[1:]}
    assert checks["baseline:samples"] in ("PASS", "WARN")  # the interpreter's times are noisy
    assert checks["baseline:units"] == "WARN"  # its quantiles, returned as samples, are named


QUANTILES_IN_MS = """


def benchmark(artifact, case, repetitions):
    x, y = _inputs(case)
    artifact.add(x, y)
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        artifact.add(x, y)
        times.append((time.perf_counter() - t0) * 1e3)  # milliseconds, as do_bench returns
    times.sort()
    quantiles = [times[2], times[1], times[3]]  # do_bench(..., quantiles=[0.5, 0.2, 0.8])
    return {"samples_us": quantiles, "warmup_count": 1, "cache_policy": "none"}
"""


def test_validate_warns_of_samples_that_are_quantiles_in_milliseconds(tmp_path):
    """A harness written for do_bench(..., quantiles=[0.5, 0.2, 0.8]) returns three numbers in
    milliseconds: validation warns that a call returned more samples than asked and that they
    are about 1000x shorter than the kernel's own launches while it was verified."""
    bundle = vecadd_bundle(tmp_path / "bundle", harness_append=QUANTILES_IN_MS)
    args = ["validate", "--kernel", str(KERNEL), "--bundle", str(bundle), "--max-cv", "5"]
    r = _invoke(args)
    assert r.exit_code == 0, r.output
    (line,) = [ln for ln in r.stdout.splitlines() if ln.startswith("WARN")]
    assert line.split()[1] == "baseline:units", line
    assert "benchmark(artifact, case, 2) returned 3 samples on case" in line
    assert "benchmark() must return microseconds" in line and "x shorter than its kernels'" in line


def _replay_into(live) -> str:
    import tempfile

    from tlxstore.fold import RunState
    from tlxstore.runlog import RunLog
    from tlxstore.testing import small_run

    with tempfile.TemporaryDirectory() as d:
        envs = RunLog.create(Path(d), "r20261130-000000-abcdef").append(small_run(2))
    state = RunState()
    for env in envs:
        state.apply(env)
        live(env, state)
    live.close()
    return live.stream.getvalue()


def test_the_live_log_shows_a_progress_line_on_a_terminal_only():
    import io

    from cli.optimize_cmds import LiveLog

    tty = _replay_into(LiveLog(io.StringIO(), tty=True))
    plain = _replay_into(LiveLog(io.StringIO(), tty=False))
    assert "\r\033[K" in tty and "[round 1/" in tty
    assert "\033" not in plain and "[round" not in plain
    assert plain.splitlines() == [
        ln
        for ln in tty.replace("\r\033[K", "\n").splitlines()
        if ln and not ln.startswith("[round")
    ]


@pytest.mark.slow
def test_the_revalidated_winner_is_committed_to_the_kernels_git_repository(
    tmp_path, scripted, monkeypatch
):
    repo = tmp_path / "repo"
    kernel = kernel_in_git(repo, monkeypatch)
    scripted.append(set_block(256))
    # the sleep bundle: on the timed vecadd bundle a full run on 2 cores beside other tests once
    # read BLOCK 256 as no winner
    args = [
        a for a in _scripted_args(tmp_path, rounds=1, kernel=kernel) if a != "--no-commit-winner"
    ]
    r = _invoke(
        [
            *args,
            "--commit-message",
            "vecadd: wider blocks",
        ]
    )
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["commit"]["success"] and out["commit"]["vcs"] == "git"
    log = git(repo, "log", "-1", "--format=%s%n%b")
    assert log.startswith("vecadd: wider blocks") and "TLX agent authored" in log
    assert "BLOCK_SIZE = 256" in kernel.read_text()
    assert "committed c001 as" in r.stderr


def test_exit_codes_follow_the_contract():
    from optimizer.reporting.result import CommitResult, RunResult
    from tlxstore.events import StoppingReason

    base = RunResult(
        run_id="r",
        output_dir="o",
        store="s",
        stopping_reason=StoppingReason.MAX_ROUNDS,
        success=True,
        baseline=[],
        final=[],
        speedup=1.2,
        ci_low=1.1,
        ci_high=1.3,
        winner_id="c001",
        commit=None,
        experiments=[],
    )
    failed_commit = CommitResult(
        vcs=None,
        success=False,
        conflict=False,
        rev_after=None,
        subject=None,
        diagnostics="not in a repository",
    )
    assert base.exit_code == 0
    assert base.model_copy(update={"success": False, "winner_id": None}).exit_code == 2
    assert base.model_copy(update={"commit": failed_commit}).exit_code == 3
    edited = [
        "the kernel k.py (/k.py) changed while c001 was being proposed (seen at 10:00:00 UTC)"
    ]
    assert base.model_copy(update={"changed_files": edited}).exit_code == 3  # kept, not committed
    no_winner = base.model_copy(update={"success": False, "winner_id": None})
    assert no_winner.model_copy(update={"changed_files": edited}).exit_code == 2
    assert (
        base.model_copy(
            update={"stopping_reason": StoppingReason.INTERRUPTED, "success": False}
        ).exit_code
        == 130
    )
    assert (
        base.model_copy(
            update={"stopping_reason": StoppingReason.BUNDLE_CHANGED, "success": False}
        ).exit_code
        == 1
    )


@pytest.mark.slow
def test_without_a_provider_or_model_the_tune_provider_runs(tmp_path):
    r = _invoke(_args(tmp_path, extra=["--max-rounds", "1", "--candidates-per-round", "1"]))
    assert r.exit_code in (0, 2), r.stderr
    out = json.loads(r.stdout)
    started = Store(tmp_path / "s.duckdb").run_envelopes(out["run_id"])[0].event
    assert started.provider == "tune" and started.model is None
    assert len(out["experiments"]) == 1 and out["experiments"][0]["provider"] == "tune"
    assert "provider tune" in r.stderr.splitlines()[0]


def test_resume_refuses_settings_that_would_be_ignored(tmp_path):
    r = _invoke(
        [
            "optimize",
            "--resume",
            "r1",
            "--kernel",
            "k.py",
            "--max-rounds",
            "3",
            "--store",
            str(tmp_path / "s.duckdb"),
        ]
    )
    assert r.exit_code == 1
    assert (
        r.stderr.strip()
        == "Error: --resume continues with the run's own settings; drop --kernel, --max-rounds"
    )


def test_what_the_users_own_kernel_does_is_not_held_against_its_baseline(tmp_path):
    # A lock from `threading` is a static finding in a candidate (work escaping the timer), but
    # this is the user's own kernel: validation must not refuse the baseline for it.
    text = "import threading\n_LAUNCH_LOCK = threading.Lock()\n" + KERNEL.read_text()
    r = _invoke(
        [
            "validate",
            "--kernel",
            str(kernel_copy(tmp_path / "src", text)),
            "--bundle",
            str(vecadd_bundle(tmp_path / "bundle")),
            "--max-cv",
            "5",
            "--benchmark-repetitions",
            "3",
        ]
    )
    assert r.exit_code == 0, r.stdout + r.stderr
    assert "PASS baseline:verify" in " ".join(r.stdout.split())


def test_committing_a_kernel_outside_any_repository_is_refused_before_anything_runs(tmp_path):
    argv = [a for a in _args(tmp_path) if a != "--no-commit-winner"]
    r = _invoke(argv)
    assert r.exit_code == 1
    kernel = (tmp_path / "src" / "vecadd_kernel.py").resolve()
    assert r.stderr.strip() == (
        f"Error: cannot commit the winner: {kernel} is not inside a git or Mercurial repository; "
        "pass --no-commit-winner to keep the winner in the output folder only"
    )
    assert not (tmp_path / "out").exists() and not (tmp_path / "s.duckdb").exists()


def test_optimize_help_gives_examples_and_the_exit_codes():
    r = _invoke(["optimize", "--help"])
    assert r.exit_code == 0
    text = " ".join(r.stdout.split())
    assert "Examples:" in text and "tlxdb optimize --resume" in text
    assert "3 the winner is kept in the output folder, not committed" in text
    assert "130 interrupted" in text


def test_the_llm_provider_without_litellm_is_refused_before_the_baseline_is_measured(
    tmp_path, monkeypatch
):
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "litellm" else real_find_spec(name, *a),
    )
    r = _invoke(_args(tmp_path, extra=["--provider", "llm", "--model", "openai/x"]))
    assert r.exit_code == 1
    assert r.stderr.strip() == (
        "Error: --provider llm needs litellm, an optional extra: pip install 'tlxdb[llm]'"
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("devices", "simulated", "message"),
    [
        ("0,9", "4", "--devices '0,9': no device 9 here (devices: 0, 1, 2, 3)"),
        ("1,1", "4", "--devices '1,1' names a device twice"),
        ("gpu", "4", "--devices 'gpu': give 'all' or device indexes such as 0,1,3"),
        ("0,1", None, "--devices '0,1': no device 1 here (devices: 0)"),
        (
            "all",
            "none",
            "TLXDB_SIMULATED_DEVICES=none: Input should be a valid integer, unable to parse string as an integer",
        ),
    ],
)
def test_devices_that_do_not_exist_are_refused(tmp_path, monkeypatch, devices, simulated, message):
    if simulated is not None:
        monkeypatch.setenv("TLXDB_SIMULATED_DEVICES", simulated)
    _fails(_args(tmp_path, extra=["--devices", devices]), message, tmp_path)


def test_resume_keeps_the_runs_own_devices(tmp_path):
    r = _invoke(["optimize", "--resume", "r2099", "--devices", "all"])
    assert r.exit_code == 1
    assert (
        r.stderr.strip() == "Error: --resume continues with the run's own settings; drop --devices"
    )


@pytest.mark.parametrize(
    ("file", "content", "message"),
    [
        ("budget.json", {"max_rounds": "5"}, 'budget.json: max_rounds: input should be a valid integer (got "5")'),
        ("budget.json", {"max_rounds": True}, "budget.json: max_rounds: input should be a valid integer (got true)"),
        ("budget.json", {"min_speedup": "1.05"}, 'budget.json: min_speedup: input should be a valid number (got "1.05")'),
        ("cases.json", [{"case_id": "a", "weight": "2"}], 'cases.json: [0].weight: input should be a valid number (got "2")'),
        ("cases.json", [{"case_id": "a", "protected": "no"}], 'cases.json: [0].protected: input should be a valid boolean (got "no")'),
        ("cases.json", "[" * 5000 + "]" * 5000, "cases.json nests deeper than 64 levels; tlxdb does not read it"),
    ],
)  # fmt: skip
def test_bundle_values_of_the_wrong_type_are_refused_not_coerced(tmp_path, file, content, message):
    """budget.json "5" / true and cases.json "weight": "2" / "protected": "no" were coerced
    silently; deeply nested JSON was a RecursionError traceback."""
    bundle = vecadd_bundle(tmp_path / "bundle")
    text = content if isinstance(content, str) else json.dumps(content)
    (bundle / file).write_text(text)
    args = ["validate", "--kernel", str(kernel_copy(tmp_path / "src")), "--bundle", str(bundle)]
    r = CliRunner().invoke(main, args)
    assert one_error_line(r) == message


@pytest.mark.slow
def test_a_clear_win_after_the_first_promotion_is_decided_on_its_first_window(tmp_path, scripted):
    """c001 (BLOCK 128, 1.25x) is the run's first promotion: its second window measures the
    instances. c002 (BLOCK 512, 1.33x over c001) clears every bar by more than 10% on an interval
    that carries them: decided on its first window, the decision and the live log saying why,
    and no remeasure window measured for it."""
    scripted.extend([set_block(128), set_block(512)])
    r = _invoke(_scripted_args(tmp_path, rounds=2, cases=VECADD_CASES[:1]))
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["winner_id"] == "c002"
    windows = _invoke(
        [
            "query",
            "--store",
            str(tmp_path / "s.duckdb"),
            "--format",
            "csv",
            "SELECT DISTINCT window_id FROM samples WHERE phase = 'round' ORDER BY 1",
        ]
    )
    assert windows.stdout.split() == ["window_id", "c001", "c001.remeasure", "c002"]
    assert (
        "c002 PROMOTED" in r.stderr
        and "held in a second window" not in r.stderr.split("c002 PROMOTED")[1].splitlines()[0]
    )
    assert re.search(
        r"decided on its first window: its CI lower bound [\d.]+ lies \d+% above the incumbent "
        r"c001's 1\.25\d*x \(at least 10%\)",
        r.stderr,
    ), r.stderr

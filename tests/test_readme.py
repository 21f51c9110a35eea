"""README.md as a new user reads it: "On a fresh machine" gives exactly two commands (the main job
and the tests); the main job writes to the store the everyday commands read, and each of those
works right after it (run here on a shorter budget); the GPU section's `tlxdb bundle new` names
the softmax kernel's entry point and arguments rightly."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import main

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()


def section(title: str) -> str:
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


def fenced(text: str) -> list[str]:
    return re.findall(r"```[a-z]*\n(.*?)```", text, re.S)


def tlxdb_args(command: str, verb: str) -> list[str]:
    """The argv of the `tlxdb VERB ...` step of a chained shell command, without `tlxdb`."""
    for step in command.split("&&"):
        argv = shlex.split(step)
        if argv and argv[0].endswith("tlxdb") and argv[1:2] == [verb]:
            return argv[1:]
    raise AssertionError(f"no tlxdb {verb} in {command!r}")


def cli(*argv: str):
    return CliRunner().invoke(main, list(argv))


def test_a_fresh_machine_gets_exactly_two_commands():
    blocks = fenced(section("On a fresh machine"))
    assert len(blocks) == 2
    main_job, tests = (b.strip() for b in blocks)
    assert "\n" not in main_job and "\n" not in tests
    assert "tlxdb optimize" in main_job and "pytest" in tests
    assert "On a fresh machine" not in section("On a CUDA GPU")


@pytest.mark.slow
def test_the_everyday_commands_work_right_after_the_main_job(tmp_path, monkeypatch):
    job = tlxdb_args(fenced(section("On a fresh machine"))[0], "optimize")
    everyday = [
        line.split("  #")[0].strip()
        for line in fenced(section("Using it"))[0].splitlines()
        if line.startswith("tlxdb ")
    ]
    assert "--store" not in job and not [c for c in everyday if "--store" in c]  # one store
    # the main job's kernel and bundle, on a shorter budget (budget.json wins over flags) and one
    # smaller case: what is tested is where the run goes and what reads it
    bundle = tmp_path / "host"
    shutil.copytree(REPO / job[job.index("--bundle") + 1], bundle)
    (bundle / "budget.json").write_text(
        json.dumps({"max_rounds": 1, "candidates_per_round": 1, "benchmark_repetitions": 3})
    )
    case = {"case_id": "2x512", "parameters": {"n_rows": 2, "n_cols": 512, "dtype": "float32"}}
    (bundle / "cases.json").write_text(json.dumps([case]))
    job[job.index("--bundle") + 1] = str(bundle)
    job[job.index("--kernel") + 1] = str(REPO / job[job.index("--kernel") + 1])
    done = cli(*job, "--max-cv", "5")
    assert done.exit_code in (0, 2), done.output
    run_id = json.loads(done.stdout)["run_id"]

    monkeypatch.chdir(tmp_path)
    assert len(everyday) >= 6
    for command in everyday:
        argv = [run_id if a == "RUN" else a for a in shlex.split(command)[1:]]
        out = cli(*argv)
        assert out.exit_code == 0, f"{command}: {out.output}"
        assert out.stdout.strip(), command


def test_the_gpu_sections_bundle_names_the_softmax_kernel_rightly(tmp_path):
    [command] = fenced(section("On a CUDA GPU"))
    argv = tlxdb_args(command, "bundle")
    argv[argv.index("--out") + 1] = str(tmp_path / "softmax-gpu")
    argv[argv.index("--kernel") + 1] = str(REPO / argv[argv.index("--kernel") + 1])
    out = cli(*argv, "--backend", "cpu", "--no-validate")  # the static checks, here without a GPU
    assert out.exit_code == 0, out.output
    optimize = tlxdb_args(command, "optimize")
    assert optimize[optimize.index("--bundle") + 1] == "softmax-gpu"

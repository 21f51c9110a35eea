"""Reading ncu CSV (shapes: see data/README.md), building its command line, running it."""

from __future__ import annotations

import stat
import sys
import textwrap
import time
from pathlib import Path

import pytest

from profilers import ncu
from profilers.metrics import MetricSource
from profilers.normalize import normalize

DATA = Path(__file__).parent / "data"


def _summary(name: str, requested=ncu.DEFAULT_METRICS):
    return ncu.parse_csv((DATA / name).read_text()).summary(requested)


def test_raw_page_values_have_canonical_units_and_no_thousands_separators():
    report = ncu.parse_csv((DATA / "ncu_raw_vector_add.csv").read_text())
    assert [la.launch_id for la in report.launches] == ["0", "1"]
    first = report.launches[0].metrics
    assert (
        first["dram__bytes_read.sum"].value == 134217728
        and first["dram__bytes_read.sum"].unit == "bytes"
    )
    assert first["gpu__time_duration.sum"].value == pytest.approx(50.368)
    assert first["gpu__time_duration.sum"].unit == "us"
    assert first["sm__throughput.avg.pct_of_peak_sustained_elapsed"].unit == "pct"
    assert first["launch__registers_per_thread"].unit == "register/thread"
    assert all(m.source == MetricSource.NCU for m in first.values())


def test_na_cell_is_unknown_with_a_diagnostic_never_zero():
    summary = _summary("ncu_raw_vector_add.csv")
    hit_rate = summary.metric("lts__t_sector_hit_rate.pct")
    assert hit_rate is not None and hit_rate.value is None
    assert any(
        "lts__t_sector_hit_rate.pct unreadable ('n/a') for launch 1" in d
        for d in summary.diagnostics
    )


def test_sums_add_over_launches_and_percentages_are_time_weighted():
    summary = _summary("ncu_raw_vector_add.csv")
    assert summary.metric("gpu__time_duration.sum").value == pytest.approx(50.368 + 51.264)  # type: ignore[union-attr]
    assert summary.metric("dram__bytes_write.sum").value == 2 * 67108864  # type: ignore[union-attr]
    expected = (89.8 * 50.368 + 88.2 * 51.264) / (50.368 + 51.264)
    pct = summary.metric("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed")
    assert pct.value == pytest.approx(expected)  # type: ignore[union-attr]
    (share,) = summary.attribution
    assert (share.name, share.count, share.fraction) == ("add_kernel", 2, 1.0)


def test_auto_scaled_units_are_converted():
    summary = _summary("ncu_raw_auto_units.csv")
    assert summary.metric("dram__bytes_read.sum").value == pytest.approx(100.66e6)  # type: ignore[union-attr]
    assert summary.metric("dram__bytes_write.sum").value == pytest.approx(512e3 + 4096e3)  # type: ignore[union-attr]
    assert [s.name for s in summary.attribution][0] == "matmul_kernel"
    assert summary.attribution[0].fraction == pytest.approx(185.5 / 190.0)


def test_requested_metric_ncu_did_not_report_is_unknown():
    summary = _summary("ncu_raw_auto_units.csv")
    missing = summary.metric("lts__t_sector_hit_rate.pct")
    assert missing is not None and missing.value is None
    assert any(
        "lts__t_sector_hit_rate.pct not reported for launch 0 (matmul_kernel)" in d
        for d in summary.diagnostics
    )


def test_real_h200_capture_reads_requested_counters_and_ignores_text_columns():
    """ncu 2025.3.1 on an H200, --page raw --print-units base, one launch of the 2^24 fp32 add
    in gpu_vector_add.py; the raw page also carries hundreds of device__/launch__ columns,
    some of them text ("NVIDIA H200", "PolicySpread")."""
    report = ncu.parse_csv((DATA / "ncu_raw_h200_vector_add.csv").read_text())
    (launch,) = report.launches
    assert launch.kernel == "add_kernel"
    assert launch.unreadable["device__attribute_display_name"] == "NVIDIA H200"
    summary = report.summary()
    assert [m.name for m in summary.metrics] == list(ncu.DEFAULT_METRICS)
    values = {m.name: m.value for m in summary.metrics}
    assert values["gpu__time_duration.sum"] == pytest.approx(44.64)
    assert values["dram__bytes_read.sum"] == 134225920
    assert values["dram__bytes_write.sum"] == 46407168
    assert values["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"] == 84.12
    assert values["sm__throughput.avg.pct_of_peak_sustained_elapsed"] == 5.8
    assert values["launch__registers_per_thread"] == pytest.approx(26)
    assert summary.diagnostics == []
    assert summary.kernel_names == ["add_kernel"]


def test_details_page_is_read_launch_by_launch():
    report = ncu.parse_csv((DATA / "ncu_details_vector_add.csv").read_text())
    (launch,) = report.launches
    assert launch.kernel == "add_kernel"
    assert launch.metrics["gpu__time_duration.sum"].value == pytest.approx(50.368)
    assert launch.metrics["dram__bytes_read.sum"].value == 134217728


@pytest.mark.parametrize(
    ("cell", "value"),
    [
        ("1,234,567", 1234567.0),
        ("12.5", 12.5),
        ("n/a", None),
        ("", None),
        ("1,2", None),
        ("3e-05", 3e-05),
    ],
)
def test_parse_number(cell, value):
    assert ncu.parse_number(cell) == value


def test_output_without_csv_says_so_and_names_a_permission_error():
    text = (
        "==PROF== Connected to process 1 (/usr/bin/python3)\n"
        "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
        "Performance Counters on the target device 0.\n"
    )
    report = ncu.parse_csv(text)
    assert report.launches == []
    assert any("no permission" in d for d in report.diagnostics)
    assert any("no CSV header" in d for d in report.diagnostics)
    summary = report.summary()
    assert all(m.value is None for m in summary.metrics)
    assert "ncu: no kernel launch was profiled" in summary.diagnostics


def test_command_never_lets_ncu_change_clocks(tmp_path):
    argv = ncu.command(
        ["python", "bench.py"], tmp_path / "x.csv", kernel_regex="add_.*", launch_count=3
    )
    i = argv.index("--clock-control")
    assert argv[i + 1] == "none"
    assert argv[-2:] == ["python", "bench.py"]
    assert argv[argv.index("--metrics") + 1] == ",".join(ncu.DEFAULT_METRICS)
    assert argv[argv.index("--kernel-name") + 1] == "regex:add_.*"
    assert argv[argv.index("--launch-count") + 1] == "3"
    assert argv[argv.index("--page") : argv.index("--page") + 2] == ["--page", "raw"]
    with pytest.raises(ValueError):
        ncu.command([], tmp_path / "x.csv")


def _fake_ncu(directory: Path, body: str) -> Path:
    """A stand-in `ncu` executable: a Python script that honours --log-file."""
    script = directory / "fake-ncu"
    script.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def test_run_profiles_the_command_and_reads_the_log(tmp_path):
    fixture = DATA / "ncu_raw_vector_add.csv"
    fake = _fake_ncu(
        tmp_path,
        """
        import subprocess, sys
        args = sys.argv[1:]
        assert args[args.index("--clock-control") + 1] == "none"
        log = args[args.index("--log-file") + 1]
        with_value = {"--clock-control", "--target-processes", "--page", "--print-units",
                      "--metrics", "--log-file", "--kernel-name", "--launch-skip", "--launch-count"}
        i = 0
        while args[i].startswith("--"):
            i += 2 if args[i] in with_value else 1
        target = args[i:]
        rc = subprocess.call(target)
        open(log, "w").write(open(FIXTURE).read())
        sys.exit(rc)
        """.replace("FIXTURE", repr(str(fixture))),
    )
    marker = tmp_path / "ran"
    target = [sys.executable, "-c", f"open({str(marker)!r}, 'w').write('yes')"]
    result = ncu.run(target, tmp_path / "art", timeout_s=30, ncu=str(fake))
    assert marker.read_text() == "yes"
    assert result.returncode == 0 and not result.timed_out
    summary = result.summary()
    assert summary.metric("gpu__time_duration.sum").value == pytest.approx(101.632)  # type: ignore[union-attr]
    assert set(result.artifacts) == {"csv", "stdout"}
    assert all(Path(p).is_absolute() and Path(p).exists() for p in summary.artifacts)
    compact = result.compact()
    assert compact["metrics"]["dram__bytes_read.sum"] == {"value": 2 * 134217728, "unit": "bytes"}
    assert compact["kernels"][0]["name"] == "add_kernel"
    again = normalize({"ncu": compact})
    assert again.metric("gpu__time_duration.sum", MetricSource.NCU).value == pytest.approx(101.632)  # type: ignore[union-attr]
    assert again.kernel_names == ["add_kernel"] and again.attribution[0].count == 2


def test_run_kills_the_whole_group_at_the_timeout(tmp_path):
    fake = _fake_ncu(
        tmp_path,
        """
        import subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        time.sleep(60)
        """,
    )
    started = time.monotonic()
    result = ncu.run(["true"], tmp_path / "art", timeout_s=1.0, ncu=str(fake))
    assert time.monotonic() - started < 20
    assert result.timed_out and result.returncode is None
    assert "ncu: killed after 1 s" in result.summary().diagnostics


def test_run_without_ncu_reports_it_instead_of_raising(tmp_path):
    result = ncu.run(["true"], tmp_path, timeout_s=5, ncu="no-such-ncu-binary")
    assert result.returncode is None
    summary = result.summary()
    assert "ncu: 'no-such-ncu-binary' not found on PATH" in summary.diagnostics
    assert summary.metric("gpu__time_duration.sum").value is None  # type: ignore[union-attr]

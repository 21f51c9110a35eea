"""The live log's line for a noisy case's extra block names the member whose samples are noisy:
a case gets extra blocks when any member of the window is over max_cv (window.noisy_cases), and
the line used to quote the candidate's own CV, small, when the baseline's was the noisy one."""

from __future__ import annotations

from optimizer.reporting.live import timeline
from tlxstore.events import BASELINE_ID, BenchmarkSampled, Phase
from tlxstore.testing import candidate_events, envelopes, run_started


def _call(cid: str, block: int, samples: list[float], extra: bool = False) -> BenchmarkSampled:
    return BenchmarkSampled(
        candidate_id=cid,
        case_id="small",
        phase=Phase.ROUND,
        window_id="c001",
        block=block,
        samples_us=samples,
        extra=extra,
    )


def test_an_extra_block_for_a_noisy_case_quotes_the_noisy_member_s_cv():
    events = [run_started()]
    events += candidate_events(BASELINE_ID, "def kernel(): pass", cases=("small",))
    events += candidate_events("c001", "def kernel(): return 1", cases=("small",))[:4]
    calm, noisy = [50.0, 50.5], [20.0, 60.0]
    for block in range(3):
        events += [_call("c001", block, calm), _call(BASELINE_ID, block, noisy)]
    events.append(_call("c001", 3, calm, extra=True))
    line = timeline(envelopes("r1", events))[-1]
    assert "c001 small is noisy (baseline's CV 0.548 over 6 samples)" in line, line


def test_the_candidate_s_own_noise_is_quoted_without_a_name():
    events = [run_started()]
    events += candidate_events(BASELINE_ID, "def kernel(): pass", cases=("small",))
    events += candidate_events("c001", "def kernel(): return 1", cases=("small",))[:4]
    for block in range(3):
        events += [_call("c001", block, [20.0, 60.0]), _call(BASELINE_ID, block, [50.0, 50.5])]
    events.append(_call("c001", 3, [50.0, 50.5], extra=True))
    line = timeline(envelopes("r1", events))[-1]
    assert "c001 small is noisy (CV " in line and "baseline's" not in line, line

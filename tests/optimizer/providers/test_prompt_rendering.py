"""The prompt: guidance selected by backend and architecture, the bundle's guidance after it,
the kernel whole, and history bounded by a token budget."""

from __future__ import annotations

import re

import pytest
from conftest import PARENT_SOURCE, make_context, nearest_config

from optimizer.bundle.spec import TargetSpec
from optimizer.decision.kernel import KernelEvidence
from optimizer.providers.base import Exclusion, MeasuredCandidate
from optimizer.providers.prompts.render import (
    GUIDANCE_DIR,
    PromptBudget,
    PromptMode,
    architecture_family,
    estimate_tokens,
    guidance_manifest,
    render_prompt,
)

COMMON = ["triton-performance", "layout-conversions"]
NVIDIA = [*COMMON, "nvidia-tma-output", "nvidia-warp-barriers"]


def guidance_in(text: str) -> list[str]:
    return re.findall(r"\[guidance:([a-z0-9-]+)\]", text)


@pytest.mark.parametrize(
    ("backend", "architecture", "expected"),
    [
        ("cuda", "sm_90", [*NVIDIA, "persistent-pipelines"]),
        ("cuda", "sm_100", [*NVIDIA, "persistent-pipelines", "blackwell-clc"]),
        ("cuda", "sm_75", NVIDIA),
        ("hip", "gfx942", COMMON),
        ("cpu", "", COMMON),
    ],
    ids=["cuda-sm90-hopper", "cuda-sm100-blackwell", "cuda-unknown-arch", "hip", "cpu"],
)
@pytest.mark.parametrize("mode", list(PromptMode))
def test_guidance_documents_are_selected_by_target_family(backend, architecture, expected, mode):
    prompt = render_prompt(make_context(backend, architecture), mode)
    assert guidance_in(prompt.text) == expected
    assert prompt.guidance_ids == expected


@pytest.mark.parametrize(
    ("names", "family"),
    [
        (("sm_90a",), "hopper"),
        (("9.0",), "hopper"),
        (("", "NVIDIA H200"), "hopper"),
        (("sm_100a",), "blackwell"),
        (("10.0",), "blackwell"),
        (("", "NVIDIA B200"), "blackwell"),
        (("sm_80", "NVIDIA A100"), None),
        (("sm_120",), None),
    ],
)
def test_architecture_names_map_to_families(names, family):
    assert architecture_family("cuda", *names) == family


def test_hip_architecture_never_gets_an_nvidia_family():
    assert architecture_family("hip", "sm_90", "hopper") is None


def test_device_name_selects_family_when_target_names_no_architecture():
    ctx = make_context("cuda", "", device_kind="NVIDIA H200")
    assert "persistent-pipelines" in render_prompt(ctx, PromptMode.LLM).guidance_ids


def test_bundle_guidance_comes_after_the_built_in_guidance():
    ctx = make_context(
        target=TargetSpec(
            backend="cuda", architecture="sm_90", optimization_guidance="KEEP-FP32-ACCUMULATION"
        )
    )
    text = render_prompt(ctx, PromptMode.LLM).text
    last_builtin = text.index("[guidance:persistent-pipelines]")
    assert text.index("KEEP-FP32-ACCUMULATION") > last_builtin


def test_kernel_source_is_given_whole():
    long_source = PARENT_SOURCE + "".join(
        f"\nCONSTANT_{i} = {i}  # padding line\n" for i in range(3000)
    )
    ctx = make_context(parent_source=long_source)
    prompt = render_prompt(ctx, PromptMode.LLM)
    assert long_source.rstrip() in prompt.user


def test_measurements_and_roofline_reach_the_prompt():
    ctx = make_context(peak_bandwidth_bytes_per_s=4.24e12)
    text = render_prompt(ctx, PromptMode.LLM).user
    assert "| n65536 | 2.0 | yes |" in text
    assert "19.66 GB/s (0.5% of ceiling)" in text  # 786432 bytes in 40 us against 4.24 TB/s
    assert "memory ceiling: 4.24 TB/s" in text


def test_the_parents_kernel_evidence_and_its_deltas_reach_the_prompt():
    evidence = KernelEvidence(
        case_id="n65536",
        main_kernel="add_kernel",
        other_kernels=["flush"],
        proton_main_us=41.5,
        ncu_main_us=40.25,
        bandwidth_fraction=0.8,
        bandwidth_fraction_delta=0.05,
        bound="memory",
        ncu_delta=-0.0625,
        deep={"launch__registers_per_thread": 26.0},
        disagreement="benchmark is 2.00x ncu",
    )
    text = render_prompt(make_context(parent_kernel=[evidence]), PromptMode.LLM).user
    assert (
        "| n65536 | add_kernel | 41.50 | 40.25 | 80.0% (+5.0 pts) | — | memory | -6.2% | flush |"
        in text
    )
    assert "launch__registers_per_thread=26;" in text
    assert "clocks disagree: benchmark is 2.00x ncu" in text


def exclusion(i: int, **kw) -> Exclusion:
    values = {
        "signature": f"BLOCK={i}",
        "outcome": "rejected",
        "reason": "not faster",
        "hypothesis": f"try BLOCK {i}",
    }
    values.update(kw)
    return Exclusion(**values)


def test_exclusions_are_grouped_by_outcome_and_deduplicated():
    exclusions = [
        exclusion(1),
        exclusion(1, reason="slower on n4096"),
        exclusion(1),
        exclusion(2, outcome="failed", reason="out of resources: shared memory"),
    ]
    prompt = render_prompt(make_context(exclusions=exclusions), PromptMode.LLM)
    section = prompt.user.split("## Excluded hypotheses")[1].split("\n## ")[0]
    assert section.count("`BLOCK=1`") == 1
    assert "(x3)" in section and "not faster; slower on n4096" in section
    assert (
        section.index("### failed")
        < section.index("`BLOCK=2`")
        < section.index("### rejected")
        < section.index("`BLOCK=1`")
    )
    assert prompt.exclusions_shown == 2 and prompt.exclusions_omitted == 0


def test_exclusions_are_bounded_by_the_token_budget_not_a_count():
    many = [exclusion(i, reason="r" * 200) for i in range(200)]
    budget = PromptBudget(exclusions_tokens=1000)
    prompt = render_prompt(make_context(exclusions=many), PromptMode.LLM, budget)
    section = prompt.user.split("## Excluded hypotheses")[1].split("\n## ")[0]
    lines = [ln for ln in section.splitlines() if ln.startswith("- ")]
    assert sum(estimate_tokens(ln) for ln in lines) <= 1000
    assert (
        len(lines) == prompt.exclusions_shown
        and prompt.exclusions_shown + prompt.exclusions_omitted == 200
    )
    assert f"{prompt.exclusions_omitted} more omitted" in section
    # short exclusions: many more fit in the same budget
    short = render_prompt(
        make_context(exclusions=[exclusion(i, reason="x") for i in range(200)]),
        PromptMode.LLM,
        budget,
    )
    assert short.exclusions_shown > 3 * prompt.exclusions_shown


def test_the_most_repeated_exclusions_are_kept_when_the_budget_is_tight():
    exclusions = [exclusion(i, reason="r" * 200) for i in range(50)] + [
        exclusion(999, occurrences=7)
    ]
    prompt = render_prompt(
        make_context(exclusions=exclusions), PromptMode.LLM, PromptBudget(exclusions_tokens=200)
    )
    assert "`BLOCK=999` (x7)" in prompt.user


def test_measured_candidates_are_listed_once_per_source():
    measured = [
        MeasuredCandidate(
            run_id="r-test",
            candidate_id="c001",
            source_hash="sha256:a",
            outcome="rejected",
            speedup=0.97,
            knobs={"BLOCK": 128},
        ),
        MeasuredCandidate(
            run_id="r-old", candidate_id="c004", source_hash="sha256:a", outcome="rejected"
        ),
        MeasuredCandidate(
            run_id="r-old",
            candidate_id="c005",
            source_hash="sha256:b",
            outcome="failed",
            reason="did not build",
        ),
    ]
    text = render_prompt(make_context(measured=measured), PromptMode.LLM).user
    assert "- c001: rejected, speedup 0.970x" in text
    assert "c004" not in text
    assert "- c005 (run r-old): failed" in text


@pytest.mark.parametrize("mode", [PromptMode.LLM, PromptMode.COMMAND])
def test_the_nearest_history_reaches_the_llm_and_command_prompts(mode):
    nearest = [
        nearest_config(
            from_candidate_id="c007",
            knobs={"BLOCK_M": 128, "BLOCK_N": 256},
            speedup=1.96,
            ci_low=1.9,
            ci_high=2.02,
            measurements=2,
            differs="bundle: cases 4096x4096 → 8192x8192; same device",
        )
    ]
    assert "Nearest history" not in render_prompt(make_context(), mode).user
    text = render_prompt(make_context(nearest=nearest), mode).user
    assert "## Nearest history" in text
    assert (
        "- #1 run r-old / c007 (bundle: cases 4096x4096 → 8192x8192; same device): 1.960x vs its "
        'baseline [99% CI 1.9, 2.02], pooled over 2 measurements, knobs {"BLOCK_M": 128, '
        '"BLOCK_N": 256}'
    ) in text


def test_command_prompt_names_the_workspace_files_and_llm_prompt_the_json_reply():
    cmd = render_prompt(make_context(reference_source="REF = 1\n"), PromptMode.COMMAND).text
    llm = render_prompt(make_context(), PromptMode.LLM).text
    assert "candidate_metadata.json" in cmd and "reference_kernel.py" in cmd
    assert '"kind": "candidate"' in llm and "candidate_metadata.json" not in llm


def test_prompt_hash_identifies_the_prompt_text():
    a = render_prompt(make_context(), PromptMode.LLM)
    b = render_prompt(make_context(), PromptMode.LLM)
    c = render_prompt(make_context(round=2), PromptMode.LLM)
    assert a.prompt_hash == b.prompt_hash != c.prompt_hash
    assert a.prompt_hash.startswith("sha256:")


def test_every_guidance_document_is_in_the_manifest_and_every_entry_has_its_file():
    manifest = guidance_manifest()
    listed = {d.file for d in manifest.documents}
    on_disk = {p.name for p in GUIDANCE_DIR.glob("*.md")}
    assert listed == on_disk
    families = set(manifest.families)
    assert all(set(d.families or []) <= families for d in manifest.documents)

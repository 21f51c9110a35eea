"""The block range tune searches, from the cases as `tlxdb bundle new` writes them: the widest
dimension of the case shapes bounds the blocks, not the 16384 fallback of a case with no
integer parameter."""

from __future__ import annotations

from conftest import PARENT_SOURCE

from optimizer.bundle.scaffold import parse_cases
from optimizer.bundle.spec import CaseSpec, TargetSpec
from optimizer.providers.knobs import find_knobs
from optimizer.providers.tune import search_space

CPU = TargetSpec(backend="cpu")  # type: ignore[arg-type]


def blocks(cases: list[CaseSpec]) -> list[int]:
    return search_space(find_knobs(PARENT_SOURCE), CPU, cases)["BLOCK"]


def test_the_widest_shape_of_a_bundle_new_case_bounds_the_blocks():
    written = parse_cases(["x=1000", "y=1000", "x=5000", "y=5000"], [], "float32")
    cases = [CaseSpec.model_validate(c) for c in written]
    assert cases[1].parameters["shapes"] == {"x": [5000], "y": [5000]}
    assert blocks(cases) == [16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]
    rows = parse_cases(["x=16,1000"], ["eps=1e-5", "flag=True"], "float32")
    assert blocks([CaseSpec.model_validate(c) for c in rows])[-1] == 1024  # bools do not count


def test_flat_integer_parameters_bound_it_as_before_and_no_integer_falls_back_to_16384():
    assert blocks([CaseSpec(case_id="n", parameters={"n": 300})])[-1] == 512
    assert blocks([CaseSpec(case_id="d", parameters={"dtype": "float16"})])[-1] == 16384

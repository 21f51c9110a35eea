"""A case's artifacts folder is always one plain name inside the artifacts dir."""

from optimizer.evaluation.pipeline import case_folder


def test_a_plain_case_id_is_its_own_folder():
    assert case_folder("n2048") == "n2048"
    assert case_folder("4096x4096x4096") == "4096x4096x4096"


def test_an_id_with_a_path_in_it_never_leaves_the_folder():
    names = {case_folder(i) for i in ("../../etc", "a/b", "a b", "M=1,N=2", "..", "")}
    assert len(names) == 6
    for name in names:
        assert "/" not in name and name not in ("", ".", "..") and not name.startswith(".")

from optimizer.decision.identity import measurement_key, normalized_source, source_hashes

KERNEL = '''
"""Vector add."""
import triton

BLOCK = 64  # tuned


@triton.jit
def k(x_ptr, n):
    """Adds."""
    return x_ptr + n
'''

REFORMATTED = """import triton
BLOCK=64
@triton.jit
def k(x_ptr,n):
    return (x_ptr + n)
"""


def test_comments_docstrings_and_formatting_do_not_change_the_normalized_hash():
    raw_a, norm_a = source_hashes(KERNEL)
    raw_b, norm_b = source_hashes(REFORMATTED)
    assert raw_a != raw_b
    assert norm_a == norm_b


def test_a_changed_value_changes_the_normalized_hash():
    _, norm_a = source_hashes(KERNEL)
    _, norm_b = source_hashes(KERNEL.replace("BLOCK = 64", "BLOCK = 128"))
    assert norm_a != norm_b


def test_hashes_are_tagged_with_their_algorithm():
    raw, norm = source_hashes(KERNEL)
    assert raw.startswith("sha256:") and norm.startswith("sha256:")


def test_a_source_that_does_not_parse_still_has_a_stable_normalized_form():
    broken = "def f(:\n    return 1\n"
    assert normalized_source(broken) == normalized_source("  def f(:\n\n        return 1   \n")
    assert normalized_source(broken) != normalized_source("def f(:\n    return 2\n")


def test_a_string_statement_that_is_not_a_docstring_is_kept():
    a = "def f():\n    x = 1\n    'not a docstring'\n    return x\n"
    b = "def f():\n    x = 1\n    return x\n"
    assert normalized_source(a) != normalized_source(b)


def test_measurement_key_changes_with_device_compiler_torch_and_bundle():
    base = measurement_key("NVIDIA H200", "3.6.0", "2.11.0", "sha256:b")
    assert base == measurement_key("NVIDIA H200", "3.6.0", "2.11.0", "sha256:b")
    assert base != measurement_key("NVIDIA B200", "3.6.0", "2.11.0", "sha256:b")
    assert base != measurement_key("NVIDIA H200", "3.7.0", "2.11.0", "sha256:b")
    assert base != measurement_key("NVIDIA H200", "3.6.0", "2.12.0", "sha256:b")
    assert base != measurement_key("NVIDIA H200", "3.6.0", "2.11.0", "sha256:c")

"""`tlxdb bundle new`: a bundle for the user's own kernel (optimizer/bundle/scaffold.py).

The command parses, calls scaffold.new_bundle with the validation of `tlxdb validate`, and
renders its table; the group (cli/group.py) turns domain errors into one-line errors (exit 1).
"""

from __future__ import annotations

from pathlib import Path

import click

from cli.options import with_default


@click.group("bundle")
def bundle_group() -> None:
    """Write bundles (harness.py, cases.json, target.json) for your own kernels."""


@bundle_group.command("new")
@click.option(
    "--kernel",
    required=True,
    type=click.Path(path_type=Path),
    help="The kernel: one Python file that defines the entry point.",
)
@click.option(
    "--entry",
    required=True,
    help="The kernel file's Python function that launches the kernel and returns its result "
    "(a tensor or a tuple of them), called with the arguments by name; or the apply of a "
    "torch.autograd.Function subclass the file defines (Fn.apply, or a name bound to it, as in "
    "the Triton tutorials), called with them by position in forward's order.",
)
@click.option(
    "--reference",
    required=True,
    metavar="EXPR|FILE.py:FUNC",
    help="The trusted result: a PyTorch expression over the argument names "
    "(torch.add(x, y); torch, F and math are there), or FUNC of FILE.py taking the same "
    "arguments by name (copied into the bundle as reference_kernel.py).",
)
@click.option(
    "--shape",
    "shapes",
    multiple=True,
    required=True,
    metavar="NAME=D0,D1,...[:DTYPE]",
    help="A tensor argument of the entry point and its shape, once per tensor argument; give "
    "the set again for another case (a name given again starts the next case).",
)
@click.option(
    "--scalar",
    "scalars",
    multiple=True,
    metavar="NAME=VALUE",
    help=with_default(
        "A number, True/False or string argument of the entry point, the same in every case "
        "(a word is a string: activation=gelu; quote other text: mode=\"'a b'\").",
        "none",
    ),
)
@click.option(
    "--dtype",
    default="float32",
    show_default=True,
    help="The tensors' torch dtype (float64, float32, float16, bfloat16, int64 ... bool); "
    "NAME=...:DTYPE in --shape gives one tensor its own.",
)
@click.option(
    "--backend",
    type=click.Choice(["auto", "cpu", "cuda", "hip"]),
    default="auto",
    show_default=True,
    help="target.json's backend. auto: this machine's GPU if torch sees one, else the Triton "
    "interpreter on the CPU; cpu: the interpreter even where there is a GPU; cuda, hip: that "
    "GPU (an error without one).",
)
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The new bundle's folder; it must not exist, or be empty (never overwritten).",
)
@click.option(
    "--validate/--no-validate",
    default=True,
    help="Run `tlxdb validate`'s checks with the kernel and write the bundle only if none "
    "fails; --no-validate writes it unchecked, for you to edit.  [default: --validate]",
)
def new_cmd(
    kernel: Path,
    entry: str,
    reference: str,
    shapes: tuple[str, ...],
    scalars: tuple[str, ...],
    dtype: str,
    backend: str,
    out: Path,
    validate: bool,
) -> None:
    """Write a bundle for your own kernel from its entry point and a PyTorch reference, check
    it as `tlxdb validate` does, and print the PASS/WARN/FAIL table.

    The harness it writes draws fresh seeded inputs for every verification, computes the
    reference in float64 (float32 for 16-bit inputs) before the kernel runs, refuses a kernel
    that writes into its inputs or returns memory it shares with them, compares with tolerances
    by dtype, and times with triton.testing.do_bench (L2 flushed) on a GPU, wall clock on the
    CPU interpreter. target.json is this machine's. The files are yours to edit
    (docs/TUTORIAL.md says which parts you will want to change).

    \b
    Examples:
      tlxdb bundle new --kernel add.py --entry add --reference "torch.add(x, y)" \\
          --shape x=4096 --shape y=4096 --out add_bundle
      tlxdb bundle new --kernel rms.py --entry add_rmsnorm --reference ref.py:add_rmsnorm \\
          --shape x=8,4096 --shape residual=8,4096 --shape weight=4096 --scalar eps=1e-6 \\
          --shape x=64,8192 --shape residual=64,8192 --shape weight=8192 --dtype bfloat16 \\
          --out rms_bundle
    """
    from cli.optimize_cmds import render_validation
    from optimizer.bundle.scaffold import BundleRequest, new_bundle
    from optimizer.run import lifecycle

    request = BundleRequest.model_validate(
        {
            "kernel": kernel,
            "entry": entry,
            "reference": reference,
            "shapes": list(shapes),
            "scalars": list(scalars),
            "dtype": dtype,
            "out": out,
            "backend": backend,
        }
    )

    made = new_bundle(
        request, (lambda k, paths: lifecycle.validate_only(k, paths, {})) if validate else None
    )
    report = made.validation
    if report is not None:
        render_validation(report)
        if not made.written:  # only a failed validation keeps a bundle from being written
            failed = next(c for c in report.checks if not c.passed)
            raise click.ClickException(
                f"validation failed ({failed.name}): {failed.detail}; nothing was written (fix "
                "the kernel or --reference, or write the bundle with --no-validate and edit its "
                "harness)"
            )
    click.echo(f"wrote {made.out}: {', '.join(made.files)}")
    if report is None:
        click.echo(f"not validated; check it with: tlxdb validate --kernel {kernel} --bundle {out}")
    click.echo(f"next: tlxdb optimize --kernel {kernel} --bundle {out}")


COMMANDS = (bundle_group,)

import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent

# What `python -m pytest -m "not slow"`, the inner loop, leaves out: a folder (ending in /), a file, or one test
# (file::function) under tests/, with why. Engine, specs, CLI, render, plot, explore and the docs checks stay in it;
# the README's `python -m pytest` runs everything. Examples that no name reaches carry the marker themselves
# (test_docs_examples.py: the docs' `measure --interpret` examples). Under xdist the slow tests start first, in
# this order (the longest first), so that the run does not end on one long test while the other cores idle.
SLOW = {
    "test_benchmark_rmsnorm_linear_gpu.py": "the benchmark script's whole flow, in the interpreter, in subprocesses",
    "measure/test_comm_gloo.py": "calibrate --comm starts two processes that talk through gloo",
    "kernels/": "every kernel runs in Triton's interpreter on the CPU, numpy op by numpy op",
    "fuzz/": "hypothesis runs hundreds of whole commands a test",
    "specs/test_hf_oracle.py": "transformers builds about 270 published models on the meta device",
    "measure/test_harness.py::test_anatomy_of_a_kernel_compiled_for_hopper_on_the_cpu": "compiles for sm_90",
    # measure --interpret end to end: a fresh process each, every kernel in Triton's interpreter.
    "cli/test_cli_measure.py::test_golden_measure_interpret": "measure --interpret",
    "cli/test_cli_measure.py::test_interpret_checks_correctness_only": "measure --interpret",
    "cli/test_cli_measure.py::test_interpret_launch_anatomy_says_what_is_unknown": "measure --interpret",
    "cli/test_csv_version.py::test_measure_csv_under_the_interpreter": "measure --interpret",
    "cli/test_main.py::test_every_help_example_runs": "30 whole commands, simulations and charts among them",
}


def pytest_addoption(parser):
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="Rewrite tests/golden/* from the current output instead of comparing with it.",
    )


def pytest_configure(config):
    for key in SLOW:  # a SLOW entry that names nothing would quietly put its test back in the inner loop
        file, _, name = key.partition("::")
        path = TESTS / file
        if not path.exists() or (name and f"def {name}(" not in path.read_text()):
            raise pytest.UsageError(f"tests/conftest.py: SLOW names {key}, which is not there")


def _slow_entry(item) -> int | None:
    """The index in SLOW of the entry that names ``item``, or None."""
    if not item.path.is_relative_to(TESTS):
        return None
    path = item.path.relative_to(TESTS).as_posix()
    test = f"{path}::{getattr(item, 'originalname', item.name)}"
    for i, key in enumerate(SLOW):
        if path.startswith(key) if key.endswith("/") else key in (path, test):
            return i
    return None


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config, items):
    order = {}
    for item in items:
        entry = _slow_entry(item)
        if entry is not None:
            item.add_marker(pytest.mark.slow)
        order[item] = entry if entry is not None else len(SLOW) + (item.get_closest_marker("slow") is None)
    if hasattr(config, "workerinput"):  # an xdist worker (each sorts alike): the slow tests first
        items.sort(key=order.__getitem__)


@pytest.fixture
def update_golden(request) -> bool:
    return request.config.getoption("--update-golden")


# The fuzz tests' summary line: how many commands they ran in-process (fuzz_support.RUNS), summed over the xdist
# workers, which hand their counts to the controller when they finish.
_worker_fuzz_commands: list[int] = []


def _fuzz_commands() -> int:
    support = sys.modules.get("fuzz_support")
    return support.RUNS["commands"] if support else 0


def pytest_sessionfinish(session):
    if hasattr(session.config, "workeroutput"):  # an xdist worker
        session.config.workeroutput["fuzz_commands"] = _fuzz_commands()


@pytest.hookimpl(optionalhook=True)  # xdist's controller: a worker finished
def pytest_testnodedown(node, error):
    _worker_fuzz_commands.append(getattr(node, "workeroutput", {}).get("fuzz_commands", 0))


def pytest_terminal_summary(terminalreporter):
    if n := _fuzz_commands() + sum(_worker_fuzz_commands):
        terminalreporter.write_line(f"fuzz: {n:,} rooflinectl commands run in-process")

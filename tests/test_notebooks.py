"""Every walkthrough notebook in notebooks/ runs top to bottom, offline, without an error.

Each notebook is executed in a fresh IPython kernel (nbclient + ipykernel) with a
120-second limit per cell; a cell that raises (the notebooks assert what they show) fails
the test with the cell's traceback. Notebooks are committed without outputs, so diffs
stay small; that is checked too.
"""

from __future__ import annotations

import pathlib
import re

import ipykernel  # noqa: F401  (the dev extra installs it; the kernel runs on it)
import nbclient
import nbformat
import pytest

NOTEBOOK_DIR = pathlib.Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
CELL_TIMEOUT_S = 120
EXPECTED = {
    "01_graph_basics",
    "02_agent",
    "03_persistence",
    "04_streaming",
    "05_human_in_the_loop",
}


def test_every_walkthrough_is_present():
    assert EXPECTED <= {nb.stem for nb in NOTEBOOKS}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[nb.stem for nb in NOTEBOOKS])
def test_notebook_is_committed_without_outputs(path: pathlib.Path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    dirty = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
             and (cell.get("outputs") or cell.get("execution_count") is not None)]
    assert dirty == [], f"{path.name}: clear the outputs of cells {dirty} before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[nb.stem for nb in NOTEBOOKS])
def test_notebook_runs_top_to_bottom(path: pathlib.Path, tmp_path: pathlib.Path):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},  # the kernel's working directory
    )
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as err:
        plain = re.sub(r"\x1b\[[0-9;]*m", "", str(err))  # drop the traceback's colours
        pytest.fail(f"{path.name} failed:\n{plain}", pytrace=False)
    errors = [out for cell in nb.cells if cell.cell_type == "code"
              for out in cell.outputs if out.output_type == "error"]
    assert errors == []
    ran = [c for c in nb.cells if c.cell_type == "code"]
    assert ran and all(c.execution_count is not None for c in ran)

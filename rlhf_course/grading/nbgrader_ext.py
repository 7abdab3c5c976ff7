"""Small extensions plugged into nbgrader through its configuration (never a fork)."""
from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor
from nbgrader import utils


class StderrIsNotFailure(NbGraderPreprocessor):
    """Relabel stderr streams of grade cells as stdout, after execution and before scoring.

    nbgrader scores any stderr output in a test cell as 0, so a harmless torch UserWarning
    would cost a correct answer its points.  A failing test raises, which is an ``error``
    output and is still scored 0; the warning text stays visible, prefixed.
    """

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "code" and utils.is_grade(cell):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "stream" and output.get("name") == "stderr":
                    output["name"] = "stdout"
                    output["text"] = "[stderr] " + output.get("text", "")
        return cell, resources

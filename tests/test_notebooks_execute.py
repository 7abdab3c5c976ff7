"""Every notebook runs top to bottom, as a person would run it: the first of a file's notebooks on a fresh kernel, the
others in the same kernel emptied (%reset) after the one before (execute_in_one_kernel): one kernel start and one
import of torch, matplotlib and the explorers for the three sources and their Chinese editions, one for the releases."""
import os
from pathlib import Path

import nbformat
import pytest
from tests.support.notebook_client import execute_in_one_kernel

from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.grading import notebooks


def ran(nb) -> list:
    """The code cells that ran."""
    return [c for c in nb.cells if c.cell_type == "code" and c.execution_count]


SOURCES = {ASSIGNMENT: NOTEBOOK, "kl_penalty": "kl_penalty.ipynb", "grpo": "grpo.ipynb"}


@pytest.fixture(scope="module")
def sources(repo, lab_stage_cache) -> dict:
    """The three assignments' sources, then their Chinese editions' (<assignment>_zh), executed once for the file in
    one kernel (execute_in_one_kernel), with the instructor's modules importable: (assignment, "en" or "zh") -> the
    executed notebook.  The first English source runs on a fresh kernel; the other two after a %reset (a name one
    defines and another uses is gone); fresh kernels run those two's code, answers and hidden tests included, lab
    and explorers skipped, in the stock-autograde tests (tests/grading/test_two_assignments.py, test_grpo_grading.py).  The English ones run first: a Chinese edition's
    set-up cell sets the package's language for the rest of the kernel.  A lab cell trains the smoke setting (a few
    steps); the notebooks that train share its SFT policy and reward model (lab_stage_cache): the first one run
    trains them, the others load them, as a class's labs do on the hub."""
    order = [(name, language) for language in ("en", "zh") for name in SOURCES]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", os.pathsep.join([str(repo / "instructor"), str(repo)]))
        patch.setenv("RLHF_LAB_SETTING", "smoke")
        patch.setenv("RLHF_LAB_CACHE", str(lab_stage_cache))
        executed = execute_in_one_kernel([repo / "source" / (name if language == "en" else f"{name}_zh")
                                          / SOURCES[name] for name, language in order])
    return dict(zip(order, executed))


@pytest.fixture(scope="module")
def releases(repo) -> dict:
    """The three releases, each run until its first TODO (one kernel: execute_in_one_kernel): assignment -> the code
    cells that ran, the last one the cell that stopped it."""
    executed = execute_in_one_kernel([repo / "release" / name / notebook for name, notebook in SOURCES.items()],
                                     until_todo=True)
    return {name: ran(nb) for name, nb in zip(SOURCES, executed)}


@pytest.fixture(scope="module")
def rlhf_sources(sources):
    return {language: sources[ASSIGNMENT, language] for language in ("en", "zh")}


@pytest.fixture(scope="module")
def kl_penalty_sources(sources):
    """Its English source's test and the Chinese edition's comparison read both."""
    return {language: sources["kl_penalty", language] for language in ("en", "zh")}


@pytest.fixture(scope="module")
def grpo_sources(sources):
    return {language: sources["grpo", language] for language in ("en", "zh")}


@pytest.mark.slow
def test_source_notebook_runs_clean(rlhf_sources):
    # The lab's smoke setting: the quick one's effects (RM score up, KL up, entropy down, DPO margin
    # up) are tests/lab/test_ppo_dpo.py's, on the same code the notebook's lab cell calls.
    nb = rlhf_sources["en"]
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    lab = {notebooks.grade_id(c): c.outputs for c in nb.cells if c.cell_type == "code"
           and notebooks.grade_id(c) in ("lab_run", "lab_plots")}
    assert "tiny LM:" in str(lab["lab_run"]) and "PPO samples after:" in str(lab["lab_run"])
    assert sum("image/png" in o.get("data", {}) for o in lab["lab_plots"]) == 2  # the PPO and the DPO figure
    assert "A = +1: objective = 1.0200" in text
    assert "A = -1: objective = -1.6600" in text
    assert "policy prefers y_w: loss = 0.5544" in text and "policy prefers y_l: loss = 0.8544" in text
    assert "tensor([7.0051, 7.4589, 7.9415, 8.4545, 9.0000])" in text
    assert text.count("passed: ") == 31
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not any(o.output_type == "error" for o in cell.outputs), cell.source


@pytest.mark.slow
def test_release_notebook_runs_until_first_todo(releases):
    executed = releases[ASSIGNMENT]
    failing = executed[-1]
    assert failing.metadata["nbgrader"]["grade_id"] == "ppo_visible_tests"
    for cell in executed[:-1]:
        assert not any(o.output_type == "error" for o in cell.outputs)


@pytest.mark.slow
def test_kl_penalty_source_runs_clean_and_its_monte_carlo_agrees(kl_penalty_sources):
    nb = kl_penalty_sources["en"]
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "k3 per token: [0.1931, 0.3069, 0.0]" in text
    assert text.count("passed: ") == 5
    assert not any(o.output_type == "error" for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    import re
    found = re.search(r"exact KL ([\d.]+) \| mean k1 ([-\d.]+) \(negative samples: (\d+)%\) \| "
                      r"mean k3 ([-\d.]+) \(negative samples: (\d+)%\)", text)
    assert found, text
    exact, mean_k1, k1_negative, mean_k3, k3_negative = map(float, found.groups())
    assert abs(mean_k1 - exact) < 0.01 and abs(mean_k3 - exact) < 0.01  # 100 000 samples: both unbiased
    assert k1_negative > 10 and k3_negative == 0


@pytest.mark.slow
def test_kl_penalty_release_runs_until_its_todo(releases):
    executed = releases["kl_penalty"]
    assert executed[-1].metadata["nbgrader"]["grade_id"] == "kl_visible_tests"


@pytest.mark.slow
def test_kl_penalty_chinese_edition_runs_clean_and_speaks_chinese(kl_penalty_sources):
    """The Chinese KL-penalty edition's source: the English edition's printed numbers, and every hidden
    test reporting in Chinese (its set-up cell, found by grade id, sets the language)."""
    nb = kl_penalty_sources["zh"]
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "逐 token 的 k3： [0.1931, 0.3069, 0.0]" in text  # the visible test prints in Chinese too
    assert text.count("通过：") == 5 and "passed: " not in text
    assert not any(o.output_type == "error" for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "远：pi = [0.99, 0.01]" in text and "精确 KL" in text  # the demonstrations' labels too
    english = kl_penalty_sources["en"]
    import re
    numbers = lambda notebook: [re.findall(r"-?\d+(?:\.\d+)?%?", o.get("text", ""))  # noqa: E731
                                for c in notebook.cells
                                if c.cell_type == "code" and notebooks.grade_id(c) in ("kl_variance", "kl_monte_carlo")
                                for o in c.outputs]
    assert numbers(nb) == numbers(english) and len(sum(numbers(nb), [])) > 20


def test_kl_penalty_chinese_release_stops_where_the_english_one_does(repo):
    """Not run again: its code cells are the English release's but for the set-up cell's language line
    (tests/grading/test_editions.py: the releases differ only in prose), the English release runs until its TODO
    (above), and every translated line, the language line included, runs in the Chinese source (above)."""
    english, chinese = (notebooks.read(repo / "release" / name / "kl_penalty.ipynb")
                        for name in ("kl_penalty", "kl_penalty_zh"))
    assert [notebooks.grade_id(c) for c in chinese.cells] == [notebooks.grade_id(c) for c in english.cells]
    setup = next(c for c in chinese.cells if notebooks.grade_id(c) == "setup")
    assert "i18n.set_language('zh-CN')" in setup.source


@pytest.mark.slow
def test_chinese_edition_runs_clean_and_speaks_chinese(rlhf_sources):
    """The Chinese edition's source, completed with the reference answers: the same numbers, and every
    hidden test reports in Chinese.  Its lab trains the smoke setting (the same code as the English
    edition's quick run above, a few steps) and prints its summary in Chinese."""
    nb = rlhf_sources["zh"]
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "A = +1: 目标值 = 1.0200" in text and "tensor([7.0051, 7.4589, 7.9415, 8.4545, 9.0000])" in text
    assert text.count("通过：") == 31 and "passed: " not in text
    assert "PPO 训练后的样本" in text  # the lab's summary in Chinese (the Chinese explorer test in a lab stops before it)
    assert not any(o.output_type == "error" for c in nb.cells if c.cell_type == "code" for o in c.outputs)


def test_chinese_release_stops_where_the_english_one_does(repo):
    """Not run again, as for the KL penalty's and GRPO's: the same code as the English release (which runs until its
    TODO, above) but the set-up cell's language line, every translated line run in the Chinese source (above); the
    explorer's placeholder before the function exists, in Chinese, is tests/test_i18n.py's."""
    english, chinese = (notebooks.read(repo / "release" / name / NOTEBOOK) for name in (ASSIGNMENT, "rlhf_zh"))
    assert [notebooks.grade_id(c) for c in chinese.cells] == [notebooks.grade_id(c) for c in english.cells]
    setup = next(c for c in chinese.cells if notebooks.grade_id(c) == "setup")
    assert "i18n.set_language('zh-CN')" in setup.source


@pytest.mark.slow
def test_grpo_source_runs_clean_and_trains_with_the_earlier_assignments_functions(grpo_sources):
    """The lab cell finds ppo_clipped_objective and kl_estimator_k3 in the notebooks beside it (here the
    instructor's sources, as a student's fetched folders would hold theirs) and trains the smoke setting."""
    nb = grpo_sources["en"]
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "scaled:   [[0.8659, -0.8659, -0.8659, 0.8659], [-1.019, -0.3397, 0.0, 1.3587]]" in text
    assert "unscaled: [[0.5, -0.5, -0.5, 0.5], [-3.0, -1.0, 0.0, 4.0]]" in text
    assert text.count("passed: ") == 8
    lab = {notebooks.grade_id(c): c.outputs for c in nb.cells if c.cell_type == "code"
           and notebooks.grade_id(c) in ("lab_run", "lab_plots")}
    assert "GRPO on the tiny LM" in str(lab["lab_run"]) and "The lab stopped" not in str(lab["lab_run"])
    assert sum("image/png" in o.get("data", {}) for o in lab["lab_plots"]) == 1
    assert not any(o.output_type == "error" for c in nb.cells if c.cell_type == "code" for o in c.outputs)


@pytest.mark.slow
def test_grpo_release_runs_until_its_todo(releases):
    executed = releases["grpo"]
    assert executed[-1].metadata["nbgrader"]["grade_id"] == "grpo_visible_tests"


@pytest.mark.slow
def test_grpo_chinese_edition_runs_clean_and_speaks_chinese(grpo_sources):
    """The Chinese GRPO edition's source: the English edition's printed numbers, every hidden test
    reporting in Chinese, the lab trained (smoke setting) with the functions of the notebooks beside it
    and its summary in Chinese."""
    nb = grpo_sources["zh"]
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    # what the contract's expected-output block shows, line for line (the same in both editions)
    assert "scaled:   [[0.8659, -0.8659, -0.8659, 0.8659], [-1.019, -0.3397, 0.0, 1.3587]]" in text
    assert "unscaled: [[0.5, -0.5, -0.5, 0.5], [-3.0, -1.0, 0.0, 4.0]]" in text
    assert text.count("通过：") == 8 and "passed: " not in text
    lab = {notebooks.grade_id(c): c.outputs for c in nb.cells if c.cell_type == "code"
           and notebooks.grade_id(c) in ("lab_run", "lab_plots")}
    assert "在微型语言模型上运行 GRPO" in str(lab["lab_run"]) and "实验已停止" not in str(lab["lab_run"])
    assert sum("image/png" in o.get("data", {}) for o in lab["lab_plots"]) == 1
    assert not any(o.output_type == "error" for c in nb.cells if c.cell_type == "code" for o in c.outputs)


def test_grpo_chinese_release_stops_where_the_english_one_does(repo):
    """Not run again, as for the KL penalty's: the same code as the English release (which runs until its TODO,
    above) but the language line, every translated line run in the Chinese source (above)."""
    english, chinese = (notebooks.read(repo / "release" / name / "grpo.ipynb") for name in ("grpo", "grpo_zh"))
    assert [notebooks.grade_id(c) for c in chinese.cells] == [notebooks.grade_id(c) for c in english.cells]
    setup = next(c for c in chinese.cells if notebooks.grade_id(c) == "setup")
    assert "i18n.set_language('zh-CN')" in setup.source

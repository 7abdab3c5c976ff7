"""The package in Chinese: figures labelled in Chinese with a real CJK font (no glyph missing), English
labels where no CJK font is installed, the explorers' and the lab's sentences in the student's language."""
import warnings
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK, STUDENT_FUNCTIONS, explorers, i18n
from rlhf_course.lab import frontier
from rlhf_course.lab.notebook_functions import functions_from_notebook
from rlhf_course.lab import plots

matplotlib.use("Agg")
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts" / "i18n"
FRONTIER_RESULTS = frontier.load_or_run(Path(__file__).resolve().parent.parent / "notebooks" / "frontier_results.json")
HISTORY = [{"iteration": i, "reward_model_score": 0.1 * i, "gold_reward": 0.05 * i, "kl_to_reference": 0.2 * i,
            "entropy_per_token": 2.0 - 0.1 * i, "step": i, "implicit_reward_margin": 0.1 * i,
            "preference_accuracy": 0.5 + 0.04 * i, "chosen_implicit_reward": 0.05 * i,
            "rejected_implicit_reward": -0.05 * i} for i in range(10)]


@pytest.fixture(scope="module")
def fns(repo):
    return functions_from_notebook(repo / "source" / ASSIGNMENT / NOTEBOOK, STUDENT_FUNCTIONS)


def figures(fns):
    yield "ppo", lambda: explorers.plot_ppo_objective(fns["ppo_clipped_objective"])
    yield "dpo", lambda: explorers.plot_dpo_loss(fns["dpo_loss"])
    yield "gae", lambda: explorers.plot_gae(fns["compute_gae"])
    yield "lab_ppo", lambda: plots.plot_ppo_history(HISTORY)
    yield "lab_dpo", lambda: plots.plot_dpo_history(HISTORY)
    yield "grpo", lambda: explorers.plot_grpo_advantages(_group_advantages)
    yield "lab_grpo", lambda: plots.plot_ppo_history(HISTORY, method="GRPO")
    # the companion notebook's two figures, from its cached sweep
    yield "frontier", lambda: frontier.plot_frontier(FRONTIER_RESULTS)
    yield "overoptimisation", lambda: frontier.plot_overoptimisation(FRONTIER_RESULTS)


def _group_advantages(rewards, scale_by_std=True, eps=1e-4):
    centred = rewards - rewards.mean(1, keepdim=True)
    return centred / (rewards.std(1, keepdim=True) + eps) if scale_by_std else centred


def texts(figure) -> list[str]:
    found = [figure._suptitle.get_text()] if figure._suptitle else []
    for ax in figure.axes:
        found += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        legend = ax.get_legend()
        if legend is not None:
            found += [t.get_text() for t in legend.get_texts()]
    return [t for t in found if t]


def has_chinese(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def test_chinese_figures_draw_every_glyph(chinese, fns):
    """Rendered to PNG (test-artifacts/i18n/, looked at): Chinese titles, labels and legends, no two parenthesised
    groups back to back where two sentences compose one ("A > 0（好的 token）（A = +1.00，..."), and matplotlib warns of
    no missing glyph."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for name, draw in figures(fns):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            draw()
            figure = plt.gcf()
            figure.savefig(ARTIFACTS / f"{name}_zh.png", dpi=80)
        missing = [str(w.message) for w in caught if "missing from" in str(w.message) or "Glyph" in str(w.message)]
        assert missing == [], f"{name}: {missing[:3]}"
        shown = texts(figure)
        assert sum(map(has_chinese, shown)) >= 3, f"{name}: {shown}"
        assert not [text for text in shown if "）（" in text], f"{name}: {shown}"
        plt.close(figure)


def test_without_a_cjk_font_the_figures_fall_back_to_english(monkeypatch, fns):
    monkeypatch.setattr(i18n, "_language", i18n.CHINESE)
    monkeypatch.setattr(i18n, "cjk_font", lambda: None)
    for name, draw in figures(fns):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            draw()
            plt.gcf().canvas.draw()
        shown = texts(plt.gcf())
        assert shown and not any(map(has_chinese, shown)), f"{name}: {shown}"
        assert not [w for w in caught if "missing from" in str(w.message)], name
        plt.close("all")


def test_the_explorers_placeholder_and_the_lab_error_speak_chinese(monkeypatch):
    from rlhf_course.lab.student import StudentFunctionError, guard

    monkeypatch.setattr(i18n, "_language", i18n.CHINESE)

    def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
        raise NotImplementedError

    placeholder = explorers.ppo_explorer(ppo_clipped_objective)
    assert placeholder.value == "<b>先在上方实现 ppo_clipped_objective，这里就会画出图。</b>"
    guarded = guard(ppo_clipped_objective, "ppo_clipped_objective", lambda *a, **k: (), needs_grad=False)
    with pytest.raises(StudentFunctionError, match="ppo_clipped_objective 还没有实现：请先在笔记本中完成它"):
        guarded(None, None)


def test_english_is_unchanged_and_unknown_languages_are_refused():
    assert i18n.t("Implement {name} above to see this plot.", "en", name="f") == "Implement f above to see this plot."
    assert i18n.t("a sentence nobody translated", "zh-CN") == "a sentence nobody translated"
    with pytest.raises(ValueError, match="no translation for language 'fr'"):
        i18n.set_language("fr")


def test_every_chinese_template_keeps_the_english_fields():
    import string
    for english, chinese in i18n.ZH.items():
        fields = lambda text: sorted(f for _, f, _, _ in string.Formatter().parse(text) if f)  # noqa: E731
        assert fields(english) == fields(chinese), english


def test_the_grpo_lab_summary_speaks_chinese_in_aligned_columns(monkeypatch):
    """A Chinese character takes two columns: padded by columns, the four lines end in the same column."""
    import unicodedata

    from rlhf_course.lab.grpo import GrpoLabResult

    monkeypatch.setattr(i18n, "_language", i18n.CHINESE)
    row = {"reward_model_score": 0.1, "gold_reward": 0.02, "kl_to_reference": 0.0, "entropy_per_token": 2.9}
    summary = GrpoLabResult([row, row], {}, {"SFT and reward model": 25.3, "GRPO": 11.0}).summary()
    first, *lines = summary.splitlines()
    assert first == "在微型语言模型上运行 GRPO，各阶段用时（秒）：SFT 与奖励模型 25.3, GRPO 11.0"
    columns = lambda text: sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)  # noqa: E731
    assert len(lines) == 4 and len({columns(line) for line in lines}) == 1, summary


def test_the_grpo_explorer_names_its_reward_noise_slider_in_chinese(monkeypatch):
    monkeypatch.setattr(i18n, "_language", i18n.CHINESE)
    explorer = explorers.grpo_explorer(_group_advantages)
    descriptions = [getattr(child, "description", "") for child in explorer.children]
    assert descriptions[:3] == ["G", "scale_by_std", "奖励噪声"]
    plt.close("all")


def test_a_check_speaks_the_language_of_the_submission_it_judges_whatever_the_process_speaks():
    """A grader judges submissions of both editions at once, one thread each: the checks' fixed sentences
    follow the thread's language (i18n.speaking), not the process's."""
    import threading

    import torch

    from rlhf_course.grading import checks

    def judged(language, out):
        with i18n.speaking(language):
            assert i18n.language() == i18n.ENGLISH  # the process's language: what a set-up cell would restore
            out[language] = (checks.compare(torch.ones(2), torch.zeros(2), rtol=0, atol=0),
                             checks.compare(torch.ones(3), torch.zeros(2), rtol=0, atol=0, what="advantages"))

    out: dict = {}
    threads = [threading.Thread(target=judged, args=(language, out)) for language in (i18n.CHINESE, i18n.ENGLISH)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert out[i18n.ENGLISH] == ("value [1, 1], expected [0, 0]", "advantages has shape (3,), expected (2,)")
    assert out[i18n.CHINESE] == ("返回值为 [1, 1]，应为 [0, 0]", "优势的形状是 (3,)，应为 (2,)")
    assert i18n.language() == i18n.ENGLISH  # the process's language never moved


def test_every_fixed_sentence_of_the_checks_has_its_chinese():
    """A template added to checks.py without a translation would reach a Chinese student in English."""
    import ast
    from pathlib import Path

    import rlhf_course.grading.checks as checks_module

    tree = ast.parse(Path(checks_module.__file__).read_text())
    templates = {node.args[0].value for node in ast.walk(tree)
                 if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "t"
                 and node.args and isinstance(node.args[0], ast.Constant)}
    assert len(templates) >= 10
    assert sorted(templates - set(i18n.ZH)) == []


def test_a_chinese_comparison_sets_a_latin_name_apart_from_the_chinese_around_it():
    """What a check compares (checks.compare's ``what``: a value's name, or d/d and an argument's name for a
    gradient) reads in Chinese with a space wherever Latin text meets Chinese, as the rest of the edition does."""
    import re
    import torch

    from rlhf_course.grading import checks

    arguments = ("ratio", "log_p", "log_p_w", "log_p_l", "ref_log_p_w", "ref_log_p_l")
    compared = ("value", "advantages", "loss", "objective", "k3", *(f"d/d{name}" for name in arguments))
    touching = re.compile(r"[A-Za-z0-9_`)][\u4e00-\u9fff]|[\u4e00-\u9fff][A-Za-z0-9_`(]")
    with i18n.speaking(i18n.CHINESE):
        for what in compared:
            for got in (torch.ones(2), torch.ones(3), torch.ones(2, dtype=torch.int64), torch.tensor([1.0, float("nan")])):
                finding = checks.compare(got, torch.zeros(2), rtol=0, atol=0, what=what)
                for text in (str(finding), finding.public):
                    assert not touching.search(text), (what, text)


def test_the_labs_summary_reads_in_chinese_in_the_chinese_edition():
    from types import SimpleNamespace

    from rlhf_course.lab.ppo_dpo import format_summary

    summary = {"ppo_gold_reward": (0.01, 0.87), "dpo_implicit_reward_margin": (0.0, 2.51)}
    sample = {"prompt": "the film", "response": "was great", "reward_model_score": 1.5, "gold_reward": 0.5}
    result = SimpleNamespace(parameters=12345, seconds={"sft": 1.0, "ppo": 2.0}, summary=lambda: summary,
                             ppo_samples={"before": [sample], "after": [sample]})
    english = format_summary(result)
    assert "ppo_gold_reward" in english and "0.870" in english and "(RM +1.50, gold +0.50)" in english
    i18n.set_language(i18n.CHINESE)
    try:
        chinese = format_summary(result)
    finally:
        i18n.set_language(i18n.ENGLISH)
    assert "PPO 真实奖励（gold）" in chinese and "DPO 偏好边际（beta*h）" in chinese and "PPO 训练前的样本：" in chinese
    assert "0.870" in chinese and "12,345" in chinese and "[the film] was great" in chinese
    assert "ppo_gold_reward" not in chinese and "stage times" not in chinese


def test_the_labs_stop_and_warning_lines_speak_chinese_in_the_chinese_edition(monkeypatch):
    """A Chinese run of the lab: a wrong shape, a missing gradient, NaN and a failed visible test stop or warn
    in Chinese (the function's name and the numbers as they are); the English edition's lines are unchanged."""
    import torch

    from rlhf_course.lab.student import StudentFunctionError, StudentFunctions, check_before_training, guard

    monkeypatch.setattr(i18n, "_language", i18n.CHINESE)
    wrong_shape = guard(lambda ratio, advantage, eps=0.2: ratio * advantage, "ppo_clipped_objective",
                        lambda *a, **k: (), needs_grad=True)
    with pytest.raises(StudentFunctionError) as caught:
        wrong_shape(torch.ones(3, requires_grad=True), torch.ones(3))
    assert str(caught.value) == "ppo_clipped_objective 返回的形状是 (3,)，应为 ()"
    detached = guard(lambda w, l, rw, rl, beta=0.1: (w - l).detach(), "dpo_loss",
                     lambda w, *a, **k: tuple(w.shape), needs_grad=True)
    with pytest.raises(StudentFunctionError, match="^dpo_loss 返回的张量没有梯度：请对它的输入使用 torch 运算$"):
        detached(torch.ones(2, requires_grad=True), torch.ones(2), torch.ones(2), torch.ones(2))
    nan = guard(lambda w, l, rw, rl, beta=0.1: w * float("nan"), "dpo_loss", lambda w, *a, **k: tuple(w.shape),
                needs_grad=False)
    with pytest.raises(StudentFunctionError, match=r"^dpo_loss 返回了 NaN 或无穷大：\[nan, nan\]$"):
        nan(torch.ones(2), torch.ones(2), torch.ones(2), torch.ones(2))
    raises = guard(lambda rewards, *a, **k: rewards[len(rewards)], "compute_gae", lambda r, *a, **k: tuple(r.shape),
                   needs_grad=False)
    with pytest.raises(StudentFunctionError, match=r"^compute_gae 抛出了 IndexError: .*（位于 .* 第 \d+ 行："):
        raises(torch.ones(3))

    def max_for_min(ratio, advantage, clip_epsilon=0.2):
        return torch.max(ratio * advantage, torch.clamp(ratio, 1 - clip_epsilon, 1 + clip_epsilon) * advantage).mean()

    def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
        return -torch.nn.functional.logsigmoid(beta * ((log_p_w - ref_log_p_w) - (log_p_l - ref_log_p_l)))

    def compute_gae(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
        values_next = torch.cat([values[1:], torch.tensor([float(next_value)])])
        deltas, advantages, running = rewards + gamma * values_next - values, torch.zeros_like(rewards), 0.0
        for step in reversed(range(len(rewards))):
            running = deltas[step] + gamma * gae_lambda * running
            advantages[step] = running
        return advantages

    functions = StudentFunctions.wrap(max_for_min, dpo_loss, compute_gae)
    (warning,) = check_before_training(functions)
    assert warning == ("ppo_clipped_objective 没有通过它的可见测试：概率比 [0.5, 1, 1.5, 2, 3]、A = +1 的例子给出 [1.6600]，"
                       "应为 [1.0200]；实验仍会用它训练")
    assert i18n.t("Warning: {warning}", warning=warning).startswith("警告：ppo_clipped_objective 没有通过")
    monkeypatch.setattr(i18n, "_language", i18n.ENGLISH)
    (english,) = check_before_training(functions)
    assert english == ("ppo_clipped_objective does not pass its visible test: A = +1 on ratios [0.5, 1, 1.5, 2, 3] "
                       "gives [1.6600], expected [1.0200]; the lab trains with it anyway")


def test_the_frontier_studys_summaries_speak_chinese_in_aligned_columns(monkeypatch):
    """The companion notebook's printed report and samples: Chinese words around the same numbers, and the
    table's header padded by columns (a Chinese character takes two) so it sits over the English's columns."""
    import re
    import unicodedata

    english = frontier.report(FRONTIER_RESULTS), frontier.format_samples(FRONTIER_RESULTS)
    monkeypatch.setattr(i18n, "_language", i18n.CHINESE)
    chinese = frontier.report(FRONTIER_RESULTS), frontier.format_samples(FRONTIER_RESULTS)
    numbers = lambda text: re.findall(r"-?\d+\.\d+", text)  # noqa: E731
    for en, zh in zip(english, chinese):
        assert numbers(zh) == numbers(en) and len(numbers(en)) > 15
    assert chinese[1].startswith("无 KL 惩罚的 PPO（种子 1），训练前：") and "（奖励模型 +0.68，真实奖励 +0.30）" in chinese[1]
    header = next(line for line in chinese[0].splitlines() if line.startswith("设置"))
    columns = lambda text: sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)  # noqa: E731
    english_header = next(line for line in english[0].splitlines() if line.startswith("setting"))
    for name_zh, name_en in (("KL（各种子）", "KL (seeds)"), ("低于精确曲线", "below the exact curve")):
        assert columns(header[:header.index(name_zh)]) == english_header.index(name_en), header

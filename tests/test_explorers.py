"""The explorers, driven headless: moving a slider redraws with the student's function at the new setting."""
import gc
import os
import re
import subprocess
import sys
import weakref

import ipywidgets as widgets
import matplotlib
import numpy as np
import pytest
import torch

from rlhf_course import ASSIGNMENT, NOTEBOOK, STUDENT_FUNCTIONS, explorers, i18n, training_notice
from rlhf_course.lab import training_slots
from rlhf_course.lab.notebook_functions import functions_from_notebook
from rlhf_course.lab.training_slots import TrainingQueue, training_slot

from tests.support.scripted_broker import ScriptedBroker

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def fns(repo):
    return functions_from_notebook(repo / "source" / ASSIGNMENT / NOTEBOOK, STUDENT_FUNCTIONS)


def slider(explorer, description):
    return next(w for w in explorer.children if getattr(w, "description", None) == description)


def test_ppo_explorer_follows_epsilon_and_advantage(fns):
    explorer = explorers.ppo_explorer(fns["ppo_clipped_objective"])
    assert isinstance(explorer, widgets.interactive)
    slider(explorer, "epsilon").value = 0.4
    slider(explorer, "|A|").value = 1.5
    drawn = explorer.result
    assert drawn["clip_epsilon"] == pytest.approx(0.4)
    for r, want_pos, want_neg in ((0.5, 0.75, -0.9), (1.2, 1.8, -1.8), (2.0, 2.1, -3.0)):
        i = int(np.argmin(np.abs(drawn["ratio"] - r)))
        assert drawn["objective_positive"][i] == pytest.approx(want_pos)
        assert drawn["objective_negative"][i] == pytest.approx(want_neg)
        one = fns["ppo_clipped_objective"](torch.tensor([r]), torch.tensor([1.5]), 0.4).item()
        assert drawn["objective_positive"][i] == pytest.approx(one, rel=1e-5)
    # zero gradient exactly where the clipped term is active
    assert drawn["gradient_positive"][np.argmin(np.abs(drawn["ratio"] - 2.0))] == 0.0
    assert drawn["gradient_negative"][np.argmin(np.abs(drawn["ratio"] - 0.3))] == 0.0
    assert drawn["gradient_negative"][np.argmin(np.abs(drawn["ratio"] - 2.0))] == pytest.approx(-1.5)


def test_dpo_explorer_follows_beta(fns):
    explorer = explorers.dpo_explorer(fns["dpo_loss"])
    slider(explorer, "beta").value = 1.0
    drawn = explorer.result
    h = drawn["margin"]
    assert drawn["beta"] == pytest.approx(1.0)
    np.testing.assert_allclose(drawn["loss@1"], np.logaddexp(0, -h), rtol=1e-6)
    np.testing.assert_allclose(drawn["weight@1"], 1 / (1 + np.exp(h)), rtol=1e-6, atol=1e-12)
    assert "loss@0.05" in drawn and "loss@0.5" in drawn


def test_the_dpo_legend_says_beta_as_the_slider_reads_it(fns):
    import matplotlib.pyplot as plt
    explorer = explorers.dpo_explorer(fns["dpo_loss"])
    beta = slider(explorer, "beta")
    beta.value = 10 ** -0.5
    _, axes = plt.subplots(1, 3)
    explorers.plot_dpo_loss(fns["dpo_loss"], beta.value, axes=axes)
    labels = [line.get_label() for line in axes[0].get_lines() if line.get_label().startswith("beta")]
    plt.close("all")
    assert f"beta = {beta.value:{beta.readout_format}}" == "beta = 0.316" == labels[0]


def test_gae_explorer_follows_lambda_and_gamma(fns):
    explorer = explorers.gae_explorer(fns["compute_gae"])
    assert all(not w.continuous_update for w in explorer.children if isinstance(w, widgets.FloatSlider))
    slider(explorer, "lambda").value = 0.5
    slider(explorer, "gamma").value = 0.9
    drawn = explorer.result
    rewards, values = explorers.GUIDE_EPISODE
    want = fns["compute_gae"](rewards, values, 0.0, 0.9, 0.5).numpy()
    np.testing.assert_allclose(drawn["advantages_guide"], want, rtol=1e-6)
    assert drawn["spread"][-1] > drawn["spread"][0]       # lambda = 1 spreads more ...
    assert abs(drawn["bias"][-1]) < abs(drawn["bias"][0])  # ... and is less biased


def test_gae_explorer_bias_is_the_estimators_not_the_draws(fns):
    """The right panel's |bias| of A_0 is the estimator's own: zero at lambda = 1 (the discounted return minus
    V_hat(s_0) is the target itself), -0.4 V(s_0) = -2 gamma^11 at lambda = 0 (delta_0 is 0 on average here), never
    the sampling error of the panel's draws (about 0.3 at lambda = 1 with 150 independent episodes)."""
    explorer = explorers.gae_explorer(fns["compute_gae"])
    slider(explorer, "gamma").value = 0.99
    bias = explorer.result["bias"]
    assert abs(bias[-1]) < 1e-9
    assert bias[0] == pytest.approx(-2.0 * 0.99 ** 11, rel=1e-9)


def _todo(*args, **kwargs):
    raise NotImplementedError()


@pytest.mark.parametrize("factory,name", [(explorers.ppo_explorer, "ppo_clipped_objective"),
                                          (explorers.dpo_explorer, "dpo_loss"),
                                          (explorers.gae_explorer, "compute_gae")])
def test_unimplemented_function_gets_one_friendly_line(factory, name):
    _todo.__name__ = name
    shown = factory(_todo)
    assert isinstance(shown, widgets.HTML)
    assert f"Implement {name} above to see this plot." in shown.value


def test_broken_function_names_the_error():
    def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
        return ratio.numpy()

    shown = explorers.ppo_explorer(ppo_clipped_objective)
    assert isinstance(shown, widgets.HTML) and "ppo_clipped_objective raised" in shown.value


def test_under_nbgrader_skips_with_one_line(fns, monkeypatch, capsys):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    for factory, name in ((explorers.ppo_explorer, "ppo_clipped_objective"), (explorers.dpo_explorer, "dpo_loss"),
                          (explorers.gae_explorer, "compute_gae")):
        assert factory(fns[name]) is None
    assert capsys.readouterr().out.count("explorer skipped while nbgrader runs this notebook") == 3


def test_under_nbgrader_a_broken_function_is_one_plain_line_not_a_widgets_repr(monkeypatch, capsys):
    """The feedback page and the Formgrader show a cell's text output: a widget there reads
    "HTML(value='<b>...</b>')", so under nbgrader the sentence is printed instead."""
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")

    def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
        raise ValueError("nope")

    assert explorers.dpo_explorer(dpo_loss) is None
    assert explorers.ppo_explorer(_todo) is None
    said = capsys.readouterr().out
    assert "dpo_loss raised ValueError" in said and "Fix it above to see this plot." in said
    assert "above to see this plot." in said.splitlines()[-1] and "HTML(" not in said and "<b>" not in said


def test_explorer_figures_render_to_png(fns, tmp_path):
    import matplotlib.pyplot as plt
    for name, plot, function in (("ppo", explorers.plot_ppo_objective, fns["ppo_clipped_objective"]),
                                 ("dpo", explorers.plot_dpo_loss, fns["dpo_loss"]),
                                 ("gae", explorers.plot_gae, fns["compute_gae"])):
        plot(function)
        plt.savefig(tmp_path / f"{name}.png", dpi=80)
        plt.close("all")
        assert (tmp_path / f"{name}.png").stat().st_size > 20_000


def test_dpo_explorer_larger_beta_needs_smaller_margin_for_same_loss(fns):
    """What the DPO explorer's text teaches, read off the curves it draws: the loss depends on beta * h
    only, so the same loss is reached at a smaller log-ratio margin h (less drift from the reference)
    when beta is larger."""
    drawn = explorers.plot_dpo_loss(fns["dpo_loss"], beta=0.1, compare_betas=(0.05, 0.5))
    h = drawn["margin"]
    level = 0.3  # nats
    crossing = {}
    for beta in (0.05, 0.1, 0.5):
        loss = drawn[f"loss@{beta:g}"]
        assert np.all(np.diff(loss) < 0)  # the loss falls as the margin grows
        crossing[beta] = float(np.interp(level, loss[::-1], h[::-1]))
    assert crossing[0.05] > crossing[0.1] > crossing[0.5] > 0, crossing
    for beta, margin in crossing.items():  # the dots the explorer draws on the loss panel
        assert drawn[f"margin_at_same_loss@{beta:g}"] == pytest.approx(margin, rel=1e-6)
    # a fixed loss fixes beta * h: softplus(-beta h) = level
    want = -np.log(np.expm1(level))
    for beta, margin in crossing.items():
        assert beta * margin == pytest.approx(want, rel=0.02), (beta, margin)


def group_relative_advantages(rewards, scale_by_std=True, eps=1e-4):
    """A reference written here: the package holds none."""
    if rewards.shape[1] < 2:
        return torch.zeros_like(rewards)
    centred = rewards - rewards.mean(1, keepdim=True)
    return centred / (rewards.std(1, keepdim=True) + eps) if scale_by_std else centred


def test_grpo_explorer_follows_group_size_scaling_and_noise():
    explorer = explorers.grpo_explorer(group_relative_advantages)
    assert isinstance(explorer, widgets.interactive)
    slider(explorer, "G").value = 16
    slider(explorer, "scale_by_std").value = False
    drawn = explorer.result
    assert drawn["advantages"].shape == (3, 16)
    np.testing.assert_allclose(drawn["advantages"], drawn["rewards"] - drawn["rewards"].mean(1, keepdims=True), atol=1e-12)
    sizes = drawn["group_sizes"]
    # unscaled, the group mean includes the response itself: the mean step is (G - 1) / G of REINFORCE's
    np.testing.assert_allclose(drawn["your advantages_step"], (sizes - 1) / sizes, atol=0.05)
    # with an offset in the rewards, a group baseline is much less noisy than none, more so as G grows
    assert np.all(drawn["your advantages_noise"] < drawn["no baseline_noise"])
    assert drawn["your advantages_noise"][-1] < drawn["your advantages_noise"][0] / 4
    slider(explorer, "scale_by_std").value = True
    scaled = explorer.result["advantages"]
    # the difficulty bias: an easy prompt's tiny differences get advantages as large as the uneven prompt's
    easy, uneven = np.abs(scaled[0]).max(), np.abs(scaled[1]).max()
    assert 0.5 < easy / uneven < 2
    unscaled = drawn["advantages"]
    assert np.abs(unscaled[0]).max() < np.abs(unscaled[1]).max() / 3
    slider(explorer, "reward noise").value = 0.0
    assert explorer.result["advantages"].shape == (3, 16)


def test_grpo_explorer_names_an_unready_function():
    _todo.__name__ = "group_relative_advantages"
    shown = explorers.grpo_explorer(_todo)
    assert isinstance(shown, widgets.HTML) and "Implement group_relative_advantages above" in shown.value


# ----------------------------------------------------------------------------- the cost of a class drawing at once

class _DrawCounter:
    """Counts Figure.draw calls (each is a layout and a pass over every artist), as a wrapper the test installs."""

    def __init__(self, monkeypatch):
        from matplotlib.figure import Figure
        self.count, original = 0, Figure.draw

        def draw(figure, renderer):
            self.count += 1
            return original(figure, renderer)
        monkeypatch.setattr(Figure, "draw", draw)


def test_tight_png_draws_once_and_matches_the_inline_backends_png(fns, monkeypatch):
    """The inline backend prints a figure with bbox_inches="tight": two draws (issue #37).  tight_png draws
    once and gives the same picture at the same size (up to anti-aliasing of a sub-pixel shift)."""
    import io

    import matplotlib.pyplot as plt
    from PIL import Image

    from rlhf_course import figure_output

    # a figure laid out by a layout engine: what show() still crops (the panel figures are shown whole)
    fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.6), constrained_layout=True)
    explorers.plot_ppo_objective(fns["ppo_clipped_objective"], axes=axes)
    counter = _DrawCounter(monkeypatch)
    ours = figure_output.tight_png(fig)
    assert counter.count == 1
    theirs = io.BytesIO()
    fig.savefig(theirs, format="png", dpi=fig.dpi, bbox_inches="tight")  # what print_figure does
    assert counter.count == 3
    plt.close(fig)
    a, b = (np.asarray(Image.open(io.BytesIO(data)).convert("L"), dtype=float) for data in (ours, theirs.getvalue()))
    assert a.shape == b.shape
    differ = np.abs(a - b) > 64
    # measured: 0.1 % of the pixels differ by more than a quarter of the grey range, all on edges of lines
    # and glyphs; a one-pixel shift or a missing panel would be 5-10 %
    assert differ.mean() < 0.01, differ.mean()


def test_explorer_update_draws_its_figure_once(fns, monkeypatch):
    """Moving a slider redraws the student's figure with one draw, shown as one PNG (the inline backend's
    path is taken as in a kernel; here the display is captured)."""
    import IPython.display

    from rlhf_course import figure_output

    import matplotlib.pyplot as plt
    open_before = set(plt.get_fignums())
    shown = []
    monkeypatch.setattr(figure_output, "_inline_png_only", lambda fig: True)
    monkeypatch.setattr(IPython.display, "display", lambda data, raw=False: shown.append(data))
    explorer = explorers.dpo_explorer(fns["dpo_loss"])
    assert len(shown) == 1  # the first drawing, as the cell runs
    counter = _DrawCounter(monkeypatch)
    shown.clear()
    slider(explorer, "beta").value = 1.0
    assert counter.count == 1
    assert len(shown) == 1 and shown[0]["image/png"].startswith("iVBORw0KGgo")  # base64 of a PNG's signature
    assert set(plt.get_fignums()) <= open_before  # shown and closed: nothing left for the backend to print again


def _one_by_one_ppo(ppo_clipped_objective, ratios, advantage, clip_epsilon):
    points = [explorers._ppo_point(ppo_clipped_objective, r, advantage, clip_epsilon) for r in ratios]
    return np.array([v for v, _ in points]), np.array([g for _, g in points])


def test_ppo_curve_batched_is_the_single_token_calls(fns):
    """The explorer calls the student's objective once on a batch (vmap): the same numbers as 251 calls."""
    ratios = np.linspace(0.0, 2.5, 251)
    for advantage, eps in ((1.0, 0.2), (-1.5, 0.4)):
        batched = explorers._ppo_curve_batched(fns["ppo_clipped_objective"], ratios, advantage, eps)
        assert batched is not None  # the reference can be batched: the cheap path is the one taken
        for got, want in zip(batched, _one_by_one_ppo(fns["ppo_clipped_objective"], ratios, advantage, eps)):
            np.testing.assert_array_equal(got, want)


def test_functions_that_cannot_be_batched_are_called_one_by_one(fns):
    """Python control flow on a value, or a write into an unbatched tensor, makes vmap fail: the explorers then
    call the function per input and draw what it computes, silently."""
    def ppo_with_item(ratio, advantage, clip_epsilon=0.2):
        low, high = 1 - clip_epsilon, 1 + clip_epsilon
        if low <= ratio.item() <= high:
            return (ratio * advantage).mean()
        return (ratio * 0 + min(max(ratio.item(), low), high) * advantage).mean()

    ratios = np.linspace(0.0, 2.5, 26)
    assert explorers._ppo_curve_batched(ppo_with_item, ratios, 1.0, 0.2) is None
    got = explorers.ppo_curve(ppo_with_item, ratios, 1.0, 0.2)
    for g, w in zip(got, _one_by_one_ppo(ppo_with_item, ratios, 1.0, 0.2)):
        np.testing.assert_array_equal(g, w)
    assert got[1][0] == 0.0 and got[1][10] == 1.0  # flat outside the region, slope A inside

    def gae_into_a_fresh_tensor(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
        advantages, running = torch.zeros(rewards.shape[0], dtype=rewards.dtype), 0.0
        for t in reversed(range(rewards.shape[0])):
            next_v = next_value if t == rewards.shape[0] - 1 else values[t + 1]
            running = rewards[t] + gamma * next_v - values[t] + gamma * gae_lambda * running
            advantages[t] = running  # vmap cannot write a batched value into this unbatched tensor
        return advantages

    episodes = [torch.randn(12, generator=torch.Generator().manual_seed(i), dtype=torch.float64) for i in range(4)]
    for function in (gae_into_a_fresh_tensor, fns["compute_gae"]):
        got = explorers._first_advantages(function, episodes, episodes[::-1], 0.9, 0.5)
        want = [fns["compute_gae"](r, v, 0.0, 0.9, 0.5)[0].item() for r, v in zip(episodes, episodes[::-1])]
        np.testing.assert_allclose(got, want, rtol=1e-12)


# ----------------------------------------------------------------------------- while a training holds the kernel

WAITING = {i18n.ENGLISH: "A training cell is running in this notebook: slider moves wait, and the plot redraws when "
                         "it ends",
           i18n.CHINESE: "本笔记本中的训练单元格正在运行：拖动滑块后图不会马上变化，要等它运行结束才会重新绘制"}


def notice_line(explorer):
    """The explorer's status line: between its sliders and its plot."""
    line = next(w for w in explorer.children if training_notice.NOTICE_CLASS in w._dom_classes)
    assert explorer.children[-2:] == (line, explorer.out)
    return line


def shown_text(line) -> str | None:
    """What the page shows of the line: its text, or None while it takes no room."""
    return None if line.layout.display == "none" else re.sub("<[^>]+>", "", line.value)


def test_while_a_training_holds_the_kernel_every_explorer_says_its_sliders_wait(fns, monkeypatch):
    """The lab's training (its wait in the machine's queue included) writes one line under every explorer's sliders,
    in the kernel's language, and empties it when the training ends: done, failed or interrupted."""
    monkeypatch.delenv(training_slots.BROKER_VARIABLE, raising=False)  # no queue: it trains at once
    shown = [explorers.ppo_explorer(fns["ppo_clipped_objective"]), explorers.dpo_explorer(fns["dpo_loss"])]
    lines = [notice_line(explorer) for explorer in shown]
    assert [shown_text(line) for line in lines] == [None, None]
    for language, words in WAITING.items():
        assert i18n.t(training_notice.NOTICE, language) == words
        with i18n.speaking(language):
            with training_slot() as held:
                assert held is False
                assert [shown_text(line) for line in lines] == [words, words]
            assert [shown_text(line) for line in lines] == [None, None]

            broker = ScriptedBroker([(0, "queued 1 2"), (0.3, "granted 2 180")])  # one ahead, then its turn
            try:
                while_waiting = []
                say = lambda said: while_waiting.append((said, [shown_text(line) for line in lines]))  # noqa: E731
                with training_slot(TrainingQueue(broker.path), say=say) as held:
                    assert held is True
                    assert [shown_text(line) for line in lines] == [words, words]
            finally:
                broker.close()
            assert [said for said, _ in while_waiting] == [
                i18n.t("Waiting for a training slot: {ahead} ahead (the machine trains {slots} at a time)", language,
                       ahead=1, slots=2),
                i18n.t("Got a training slot after {seconds:.0f} s: training now", language, seconds=0)]
            assert all(texts == [words, words] for _, texts in while_waiting)
            assert [shown_text(line) for line in lines] == [None, None]

            for stop in (RuntimeError("the student's function raised"), KeyboardInterrupt()):
                with pytest.raises(type(stop)):
                    with training_slot():
                        assert [shown_text(line) for line in lines] == [words, words]
                        raise stop
                assert [shown_text(line) for line in lines] == [None, None]


def test_an_explorer_built_during_a_training_says_so_until_the_outer_training_ends(fns, monkeypatch):
    monkeypatch.delenv(training_slots.BROKER_VARIABLE, raising=False)
    with training_slot():
        line = notice_line(explorers.dpo_explorer(fns["dpo_loss"]))
        assert shown_text(line) == WAITING[i18n.ENGLISH]
        with training_slot():  # a training inside the training: the line stays until the outer one ends
            pass
        assert shown_text(line) == WAITING[i18n.ENGLISH]
    assert shown_text(line) is None


def test_a_closed_explorer_leaves_no_status_line_behind(fns):
    """The lines are held weakly: an explorer closed and forgotten (a cell run again) is no longer written to."""
    explorer = explorers.dpo_explorer(fns["dpo_loss"])
    line = notice_line(explorer)
    held = set(training_notice._status_lines)
    assert line in held
    del held
    for widget in (*explorer.children, explorer):
        widget.close()
    del explorer, widget
    line = weakref.ref(line)
    gc.collect()
    assert line() is None


def test_a_training_without_explorers_imports_nothing_of_ipywidgets():
    """Under nbgrader no explorer is built and the lab's training never loads ipywidgets for its notice."""
    code = ("import sys\nfrom rlhf_course.lab.training_slots import training_slot\n"
            "with training_slot():\n    pass\nprint('ipywidgets' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={k: v for k, v in os.environ.items() if k != training_slots.BROKER_VARIABLE}).stdout
    assert out.strip() == "False"

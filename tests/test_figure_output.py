"""The notebooks' panel figures keep fixed margins (rlhf_course/figure_output.py: no layout engine runs when thirty
kernels draw them at once, issue #37): every label, tick label, title and legend must still fit inside the figure,
and no panel's text may run into its neighbour's, in English and in Chinese, at the sliders' extremes and with
training curves of large numbers."""
import io

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK, STUDENT_FUNCTIONS, explorers, figure_output
from rlhf_course.lab import plots
from rlhf_course.lab.notebook_functions import functions_from_notebook

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def fns(repo):
    return {**functions_from_notebook(repo / "source" / ASSIGNMENT / NOTEBOOK, STUDENT_FUNCTIONS),
            **functions_from_notebook(repo / "source" / "grpo" / "grpo.ipynb", ("group_relative_advantages",))}


def _history(steps: int, scale: float) -> list[dict]:
    """Training curves whose tick labels are as wide as a long run's can be (negative, hundreds)."""
    return [{"iteration": i, "step": i, "reward_model_score": -scale + 0.2 * scale * i, "gold_reward": -0.5 * scale + i,
             "kl_to_reference": 15.0 * scale * i / steps, "entropy_per_token": 3.0 - 2.9 * i / steps,
             "implicit_reward_margin": -scale + 0.3 * scale * i, "preference_accuracy": min(1.0, 0.4 + 0.05 * i),
             "chosen_implicit_reward": -0.5 * scale + 0.1 * scale * i, "rejected_implicit_reward": -0.2 * scale * i}
            for i in range(steps)]


def panel_figures(fns):
    ppo, dpo, gae = fns["ppo_clipped_objective"], fns["dpo_loss"], fns["compute_gae"]
    group_relative_advantages = fns["group_relative_advantages"]
    yield "ppo explorer", lambda: explorers.plot_ppo_objective(ppo)
    yield "ppo explorer, eps 0.8 |A| 2", lambda: explorers.plot_ppo_objective(ppo, clip_epsilon=0.8, advantage=2.0)
    yield "dpo explorer", lambda: explorers.plot_dpo_loss(dpo)
    yield "dpo explorer, beta 3.16", lambda: explorers.plot_dpo_loss(dpo, beta=10 ** 0.5)
    yield "dpo explorer, beta 0.01", lambda: explorers.plot_dpo_loss(dpo, beta=0.01)
    yield "gae explorer", lambda: explorers.plot_gae(gae)
    yield "gae explorer, lambda 0 gamma 0.8", lambda: explorers.plot_gae(gae, gae_lambda=0.0, gamma=0.8)
    yield "grpo explorer", lambda: explorers.plot_grpo_advantages(group_relative_advantages)
    yield "grpo explorer, G 16 unscaled", lambda: explorers.plot_grpo_advantages(group_relative_advantages, 16, False)
    for scale in (1.0, 100.0):
        yield f"lab PPO curves x{scale:g}", lambda scale=scale: plots.plot_ppo_history(_history(60, scale))
        yield f"lab DPO curves x{scale:g}", lambda scale=scale: plots.plot_dpo_history(_history(60, scale))


def text_boxes(figure):
    """Each panel's text box in pixels (the box of its axes with their tick labels, labels, title and legend; a
    panel's twin y axis counted with it), left to right."""
    renderer = figure.canvas.get_renderer()
    panels: dict[tuple, list] = {}
    for ax in figure.axes:
        panels.setdefault(tuple(np.round(ax.get_position().bounds, 4)), []).append(ax.get_tightbbox(renderer))
    boxes = [matplotlib.transforms.Bbox.union(found) for _, found in sorted(panels.items())]
    return boxes


def check_fits(name: str, figure) -> None:
    assert getattr(figure, figure_output.FIXED_MARGINS, False), f"{name}: not made by figure_output.panels"
    figure.canvas.draw()
    width, height = figure.canvas.get_width_height()
    boxes = text_boxes(figure)
    assert len(boxes) >= 2, name
    for index, box in enumerate(boxes):
        inside = box.x0 >= 0 and box.y0 >= 0 and box.x1 <= width and box.y1 <= height
        assert inside, f"{name}: panel {index + 1}'s text leaves the {width}x{height} figure: {box.bounds}"
    for index, (left, right) in enumerate(zip(boxes, boxes[1:])):
        assert left.x1 <= right.x0, f"{name}: panels {index + 1} and {index + 2} overlap ({left.x1:.0f} > {right.x0:.0f})"


def test_panel_figures_fit_their_text_in_english(fns):
    for name, draw in panel_figures(fns):
        draw()
        check_fits(name, plt.gcf())
        plt.close("all")


def test_panel_figures_fit_their_text_in_chinese(fns, chinese):
    for name, draw in panel_figures(fns):
        draw()
        check_fits(f"{name} (zh)", plt.gcf())
        plt.close("all")


def test_a_margin_too_small_is_caught(fns, monkeypatch):
    """The check above can fail: with no room between the panels, the DPO explorer's labels collide."""
    monkeypatch.setattr(figure_output, "GAP", 0.05)
    monkeypatch.setattr(figure_output, "LEFT", 0.1)
    explorers.plot_dpo_loss(fns["dpo_loss"])
    with pytest.raises(AssertionError, match="overlap|leaves"):
        check_fits("dpo explorer", plt.gcf())
    plt.close("all")


def test_a_panel_figure_is_shown_whole_from_one_draw(fns, monkeypatch):
    """show() sends a panel figure's whole canvas (its margins hold its text: no tight box to find), from one draw."""
    import IPython.display
    from matplotlib.figure import Figure
    from PIL import Image

    draws = []
    original = Figure.draw
    monkeypatch.setattr(Figure, "draw", lambda figure, renderer: (draws.append(1), original(figure, renderer))[1])
    monkeypatch.setattr(figure_output, "_inline_png_only", lambda fig: True)
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda data, raw=False: shown.append(data))
    explorers.plot_gae(fns["compute_gae"])
    size = plt.gcf().canvas.get_width_height()
    figure_output.show()
    assert len(draws) == 1 and len(shown) == 1
    import base64
    picture = Image.open(io.BytesIO(base64.b64decode(shown[0]["image/png"])))
    assert picture.size == size  # 1200 x 360 at the default 100 dpi
    assert not plt.get_fignums()


def test_panels_refuse_a_figure_too_narrow():
    with pytest.raises(ValueError, match="do not fit"):
        figure_output.panels(3, (3.0, 3.0))
    plt.close("all")

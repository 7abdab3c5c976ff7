"""The explorers' first figures from a cache (rlhf_course/first_figures.py): a hit is the PNG the student's own figure
renders to, byte for byte; anything else (another function, a moved slider, another style, no cache) is rendered as
before; the folder holds PNGs and keys only; the hub makes it and tells every server where it is."""
import base64
import json
import os
import re
import sys
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from rlhf_course import ASSIGNMENT, NOTEBOOK, STUDENT_FUNCTIONS, explorers, figure_output, first_figures
from rlhf_course.classroom import first_figures as making
from rlhf_course.lab.notebook_functions import functions_from_notebook

matplotlib.use("Agg")

FACTORIES = {"ppo_clipped_objective": explorers.ppo_explorer, "dpo_loss": explorers.dpo_explorer,
             "compute_gae": explorers.gae_explorer}


@pytest.fixture(scope="module")
def fns(repo):
    return functions_from_notebook(repo / "source" / ASSIGNMENT / NOTEBOOK, STUDENT_FUNCTIONS)


@pytest.fixture(scope="module")
def cache(repo, tmp_path_factory):
    """The folder the hub makes (its command, in-process), from the course's reference answers in both editions."""
    folder = tmp_path_factory.mktemp("first-figures")
    assert making.main([str(folder), "--course", str(repo)]) == 0
    return folder


class Shown:
    """An explorer's drawings as a kernel's inline backend would show them (captured), and the figure draws."""

    def __init__(self, monkeypatch):
        import IPython.display
        from matplotlib.figure import Figure
        self.pngs, self.draws, original = [], 0, Figure.draw

        def draw(figure, renderer):
            self.draws += 1
            return original(figure, renderer)
        monkeypatch.setattr(Figure, "draw", draw)
        monkeypatch.setattr(figure_output, "_inline_png_only", lambda fig: True)
        monkeypatch.setattr(IPython.display, "display",
                            lambda data, raw=False: self.pngs.append(base64.b64decode(data["image/png"])))


def first_drawing(monkeypatch, name, function, folder=None):
    """(the PNG an explorer's first drawing shows, how many times a figure was drawn for it, the explorer)."""
    if folder is None:
        monkeypatch.delenv(first_figures.VARIABLE, raising=False)
    else:
        monkeypatch.setenv(first_figures.VARIABLE, str(folder))
    shown = Shown(monkeypatch)
    explorer = FACTORIES[name](function)
    assert len(shown.pngs) == 1
    return shown.pngs[0], shown.draws, explorer, shown


def cached_pngs(folder) -> set[bytes]:
    return {path.read_bytes() for path in Path(folder).glob("*.png")}


# Plausible ways to write the same functions: their numbers agree with the reference's to 9 significant digits
def ppo_with_negated_max(ratio, advantage, clip_epsilon=0.2):
    return -torch.max(-ratio * advantage, -advantage * ratio.clamp(1 - clip_epsilon, 1 + clip_epsilon)).mean()


def dpo_with_softplus(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    return F.softplus(-beta * ((log_p_w - log_p_l) - (ref_log_p_w - ref_log_p_l)))


def gae_from_deltas(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
    following = torch.cat([values[1:], torch.tensor([float(next_value)], dtype=values.dtype)])
    running, advantages = 0.0, []
    for delta in reversed(rewards + gamma * following - values):
        running = delta + gamma * gae_lambda * running
        advantages.append(running)
    return torch.stack(advantages[::-1])


# Wrong ones
def ppo_without_the_clip(ratio, advantage, clip_epsilon=0.2):
    return (ratio * advantage).mean()


def dpo_with_the_wrong_sign(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    return -F.logsigmoid(-beta * ((log_p_w - ref_log_p_w) - (log_p_l - ref_log_p_l)))


def gae_ignoring_lambda(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
    return gae_from_deltas(rewards, values, next_value, gamma, 1.0)


@pytest.mark.parametrize("name", list(FACTORIES))
def test_a_hit_is_the_png_the_reference_renders_to_in_english(fns, cache, monkeypatch, name):
    cached, draws, _, _ = first_drawing(monkeypatch, name, fns[name], cache)
    assert draws == 0 and cached in cached_pngs(cache)  # sent from the cache: nothing rasterised
    rendered, draws, _, _ = first_drawing(monkeypatch, name, fns[name])
    assert draws == 1 and rendered == cached


@pytest.mark.parametrize("name", list(FACTORIES))
def test_a_hit_is_the_png_the_reference_renders_to_in_chinese(fns, cache, monkeypatch, chinese, name):
    cached, draws, _, _ = first_drawing(monkeypatch, name, fns[name], cache)
    assert draws == 0 and cached in cached_pngs(cache)
    rendered, draws, _, _ = first_drawing(monkeypatch, name, fns[name])
    assert draws == 1 and rendered == cached


@pytest.mark.parametrize("name, variant", [("ppo_clipped_objective", ppo_with_negated_max),
                                           ("dpo_loss", dpo_with_softplus), ("compute_gae", gae_from_deltas)])
def test_the_same_function_written_another_way_hits_and_renders_to_the_same_png(cache, monkeypatch, name, variant):
    cached, draws, _, _ = first_drawing(monkeypatch, name, variant, cache)
    assert draws == 0
    rendered, _, _, _ = first_drawing(monkeypatch, name, variant)
    assert rendered == cached


@pytest.mark.parametrize("name, wrong", [("ppo_clipped_objective", ppo_without_the_clip),
                                         ("dpo_loss", dpo_with_the_wrong_sign), ("compute_gae", gae_ignoring_lambda)])
def test_a_wrong_function_misses_and_shows_its_own_figure(cache, monkeypatch, name, wrong):
    shown, draws, explorer, _ = first_drawing(monkeypatch, name, wrong, cache)
    assert draws == 1 and shown not in cached_pngs(cache)
    rendered, _, _, _ = first_drawing(monkeypatch, name, wrong)
    assert shown == rendered


def test_a_moved_slider_misses_and_moving_it_back_hits(fns, cache, monkeypatch):
    _, _, explorer, shown = first_drawing(monkeypatch, "ppo_clipped_objective", fns["ppo_clipped_objective"], cache)
    epsilon = next(w for w in explorer.children if getattr(w, "description", None) == "epsilon")
    looked_up, look_up = [], first_figures.cached_png
    monkeypatch.setattr(first_figures, "cached_png", lambda *args: looked_up.append(args) or look_up(*args))
    epsilon.value = 0.3
    assert shown.draws == 1 and shown.pngs[-1] not in cached_pngs(cache)
    assert not looked_up  # not the first values: not even a key is computed
    epsilon.value = 0.2  # the first figure again: the same numbers, the same picture
    assert shown.draws == 1 and shown.pngs[-1] == shown.pngs[0]


@pytest.mark.parametrize("rc", [{"font.size": 11}, {"axes.edgecolor": "0.3"}, {"figure.dpi": 72}])
def test_another_style_misses(fns, cache, monkeypatch, rc):
    with matplotlib.rc_context(rc):
        shown, draws, _, _ = first_drawing(monkeypatch, "dpo_loss", fns["dpo_loss"], cache)
    assert draws == 1 and shown not in cached_pngs(cache)


def test_another_font_file_misses(fns, cache, monkeypatch):
    from matplotlib import font_manager
    found = font_manager.fontManager._find_fonts_by_props
    monkeypatch.setattr(font_manager.fontManager, "_find_fonts_by_props",
                        lambda prop, **kw: [*found(prop, **kw), matplotlib.get_data_path() + "/fonts/ttf/cmr10.ttf"])
    _, draws, _, _ = first_drawing(monkeypatch, "dpo_loss", fns["dpo_loss"], cache)
    assert draws == 1


def test_without_the_variable_or_the_folder_the_explorer_renders(fns, cache, tmp_path, monkeypatch):
    for folder in (None, tmp_path / "never-made", tmp_path):  # no variable; no folder; a folder without index.json
        _, draws, _, _ = first_drawing(monkeypatch, "compute_gae", fns["compute_gae"], folder)
        assert draws == 1


def test_the_key_sees_the_ticks_settings_without_making_the_tick_objects(fns):
    def key(change=lambda ax: None):
        drawn = explorers.plot_dpo_loss(fns["dpo_loss"])
        figure = plt.gcf()
        change(figure.axes[0])
        found = first_figures.figure_key(figure, "plot_dpo_loss", {"beta": 0.1}, drawn, "en")
        ticks_made = sum(len(ax.xaxis.majorTicks) + len(ax.yaxis.majorTicks) for ax in figure.axes)
        plt.close(figure)
        return found, ticks_made

    plain, ticks_made = key()
    assert ticks_made <= 2 * 3  # the one tick each axis makes when first asked: the key walked none
    assert key()[0] == plain
    assert key(lambda ax: ax.set_xticks([-40, 0, 40]))[0] != plain
    assert key(lambda ax: ax.set_xticks([-40, 0, 40], ["a", "b", "c"]))[0] not in (plain, key(lambda ax: ax.set_xticks([-40, 0, 40]))[0])
    assert key(lambda ax: ax.set_yscale("symlog"))[0] != plain


def test_the_key_rounds_to_its_stated_digits_and_no_further():
    one, near, far = np.array([0.1, 2.0]), np.array([0.1 + 1e-12, 2.0]), np.array([0.1 + 1e-6, 2.0])
    assert first_figures.numbers_text(one) == first_figures.numbers_text(near) != first_figures.numbers_text(far)
    assert first_figures.numbers_text(-0.0) == first_figures.numbers_text(0.0)
    assert first_figures.numbers_text(one, None) != first_figures.numbers_text(near, None)


def test_the_folder_holds_pngs_and_keys_only(repo, cache):
    from PIL import Image

    from tests.support.solutions import hidden_test_lines, solution_lines
    import nbformat
    index = json.loads((cache / first_figures.INDEX).read_text())
    assert set(index) == {"format", "figures"}
    assert all(re.fullmatch("[0-9a-f]{64}", key) and name == f"{key}.png" for key, name in index["figures"].items())
    assert sorted(p.name for p in cache.iterdir()) == sorted([first_figures.INDEX, *index["figures"].values()])
    from rlhf_course.i18n import cjk_font
    # three explorers in two languages: six pictures (without a CJK font the Chinese edition's labels are English)
    assert len(index["figures"]) == len(cached_pngs(cache)) == (6 if cjk_font() else 3)
    secrets = []
    for assignment in (ASSIGNMENT, f"{ASSIGNMENT}_zh"):
        source = nbformat.read(repo / "source" / assignment / NOTEBOOK, as_version=4)
        secrets += [line for line in solution_lines(source) + hidden_test_lines(source) if len(line) > 12]
    for path in cache.iterdir():
        data = path.read_bytes()
        assert not any(line.encode() in data for line in secrets), path
        if path.suffix == ".png":
            assert data.startswith(b"\x89PNG\r\n\x1a\n")
            with Image.open(path) as picture:
                assert set(picture.text) == {"Software"}, picture.text  # matplotlib's name, no other text


def test_the_command_fills_a_folder_everyone_reads_and_nobody_else_writes(cache):
    assert {oct(path.stat().st_mode & 0o777) for path in cache.iterdir()} == {"0o644"}
    assert not list(cache.glob(".*"))  # the index written whole: no partial file left


def test_the_hub_renders_them_and_every_server_is_told_where(tmp_path):
    from rlhf_course.classroom.hub import Classroom
    from rlhf_course.classroom.server_env import ServerEnv
    room = Classroom(tmp_path, tmp_path / "base", "p_", ["a"], 1, Path("/bin/true"))
    room.server = ServerEnv.__new__(ServerEnv)
    room.server.python, room.server.path = sys.executable, os.environ["PATH"]
    room.course_id, room.passwords, room.hub_dir = "c", {name: "p" for name in room.names}, tmp_path
    command = room.first_figures_command()
    folder = str(tmp_path / "base" / "first-figures")
    assert command[:4] == [sys.executable, "-m", "rlhf_course.classroom.first_figures", folder]
    assert command[command.index("--course") + 1] == str(tmp_path)
    room.write_hub_config()
    environments = json.loads((tmp_path / "users.json").read_text())["environments"]
    assert {env[first_figures.VARIABLE] for env in environments.values()} == {folder}  # every account's server


def test_a_kernel_with_the_hubs_variable_sends_the_cached_png_without_rendering(repo, cache):
    """The cache is made outside any kernel (Agg) and read inside one (the inline backend): the keys agree, so a
    notebook's kernel of the reference answers sends the cached PNG and rasterises nothing."""
    from jupyter_client.manager import start_new_kernel

    functions_source = "\n".join(
        "".join(cell["source"]) for cell in json.loads((repo / "source" / ASSIGNMENT / NOTEBOOK).read_text())["cells"]
        if cell["cell_type"] == "code" and (cell["metadata"].get("nbgrader", {}).get("solution")
                                            or cell["metadata"].get("nbgrader", {}).get("grade_id") == "setup"))
    count_renders = ("from rlhf_course import figure_output as _fo\n_renders, _whole_png = [], _fo.whole_png\n"
                     "_fo.whole_png = lambda figure: _renders.append(1) or _whole_png(figure)")
    env = {**os.environ, first_figures.VARIABLE: str(cache), "PYTHONPATH": str(repo), "OMP_NUM_THREADS": "1"}
    manager, client = start_new_kernel(kernel_name="python3", env=env)
    try:
        shown, said = [], []

        def keep(message):
            content = message["content"]
            if message["header"]["msg_type"] == "display_data" and "image/png" in content.get("data", {}):
                shown.append(base64.b64decode(content["data"]["image/png"]))
            elif message["header"]["msg_type"] == "stream":
                said.append(content["text"])
            elif message["header"]["msg_type"] == "error":
                said.append("\n".join(content["traceback"]))
        for code in (functions_source, count_renders, "from rlhf_course.explorers import dpo_explorer\n"
                     "dpo_explorer(dpo_loss)", "print('renders', len(_renders))"):
            client.execute_interactive(code, timeout=120, output_hook=keep)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    assert len(shown) == 1 and shown[0] in cached_pngs(cache), said
    assert "renders 0" in "".join(said), said

"""Interactive explorers: sliders that plot what the student's own functions compute.

Each explorer is a pure plotting function ``plot_*(student_function, ..., axes=None)`` that draws
and returns the data it drew, plus a thin ipywidgets wrapper ``*_explorer(student_function)``.
Until the function is implemented the wrapper shows one friendly line instead of a traceback;
under nbgrader (``NBGRADER_EXECUTION`` set: validate and autograde) it prints one line and skips.
An explorer's figure is always built from the student's function; when its numbers are the reference's at the
sliders' first values, its pixels come from the class's cache of first figures (:mod:`rlhf_course.first_figures`).
"""
from __future__ import annotations

import functools
import os
import warnings
from typing import Callable

import numpy as np
import torch

from rlhf_course import figure_output, first_figures, training_notice
from rlhf_course.course.errors import CourseError
from rlhf_course.i18n import plot_language, plot_text as L, t

CLIP_COLOR, UNCLIPPED_COLOR, FLAT_COLOR = "tab:blue", "tab:gray", "tab:red"


class NotReady(CourseError):
    """The student's function is not implemented yet, or failed on the explorer's inputs."""


BETA_DECIMALS = 3  # the DPO slider reads beta to 3 decimals; the legend says the same number


def _call(function: Callable, *args):
    name = getattr(function, "__name__", "the function")
    try:
        return function(*args)
    except NotImplementedError:
        raise NotReady(t("Implement {name} above to see this plot.", name=name)) from None
    except Exception as exc:
        raise NotReady(t("{name} raised {error}. Fix it above to see this plot.", name=name,
                          error=f"{type(exc).__name__}: {exc}")) from None


# ----------------------------------------------------------------------------- PPO

def _batched(compute: Callable):
    """``compute()``, the student's function called once on a batch through ``torch.func.vmap``, or None if it
    cannot be batched (Python control flow on values, ``.item()``, in-place writes into an unbatched tensor, any
    error: the caller then calls the function once per input, as it always could).  vmap's own warnings (a slow
    fallback for some operator) would reach the student's output: they are silenced here."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return compute()
    except Exception:
        return None


def _ppo_curve_batched(ppo_clipped_objective: Callable, ratios: np.ndarray, advantage: float, clip_epsilon: float):
    """:func:`ppo_curve` in one vmapped call (values (N,), gradients (N,)), or None if the function cannot be
    batched or disagrees with its direct single-token calls at a few ratios."""
    from torch.func import vmap  # not torch.func.grad: its first call imports torch._dynamo (1 CPU-s)

    a = torch.tensor([advantage], dtype=torch.float64)
    batch = torch.tensor(np.asarray(ratios, dtype=np.float64)).unsqueeze(1).requires_grad_()  # (N, 1): N calls

    def values_and_grads():
        values = vmap(lambda r: ppo_clipped_objective(r, a, clip_epsilon))(batch)  # (N,)
        values.sum().backward()  # each value depends on its own ratio only: the sum's gradient is theirs
        return values, batch.grad if batch.grad is not None else torch.zeros_like(batch)
    found = _batched(values_and_grads)
    if found is None:
        return None
    values, grads = (x.detach().numpy().reshape(-1) for x in found)
    if values.shape != (len(ratios),) or grads.shape != (len(ratios),):
        return None
    for i in sorted({0, len(ratios) // 3, 2 * len(ratios) // 3, len(ratios) - 1}):
        value, grad = _ppo_point(ppo_clipped_objective, ratios[i], advantage, clip_epsilon)
        if not (np.isclose(value, values[i], rtol=1e-9, atol=1e-12) and np.isclose(grad, grads[i], rtol=1e-9, atol=1e-12)):
            return None
    return values, grads


def _ppo_point(ppo_clipped_objective: Callable, r: float, advantage: float, clip_epsilon: float) -> tuple[float, float]:
    """The objective and its gradient d/dr at one ratio, from one single-token call."""
    ratio = torch.tensor([float(r)], dtype=torch.float64, requires_grad=True)
    out = _call(ppo_clipped_objective, ratio, torch.tensor([advantage], dtype=torch.float64), clip_epsilon)
    out.backward()
    return out.item(), (0.0 if ratio.grad is None else ratio.grad.item())


def ppo_curve(ppo_clipped_objective: Callable, ratios: np.ndarray, advantage: float, clip_epsilon: float):
    """The per-token objective and its gradient d/dr at each ratio, as single-token calls give them: (N,), (N,).
    Batched through vmap when the function allows it (the same numbers, a hundred times cheaper: thirty
    students draw this at once), else one call per ratio."""
    batched = _ppo_curve_batched(ppo_clipped_objective, ratios, advantage, clip_epsilon)
    if batched is not None:
        return batched
    points = [_ppo_point(ppo_clipped_objective, r, advantage, clip_epsilon) for r in ratios]
    return np.array([v for v, _ in points]), np.array([g for _, g in points])


def plot_ppo_objective(ppo_clipped_objective: Callable, clip_epsilon: float = 0.2, advantage: float = 1.0,
                       axes=None) -> dict:
    """The two-panel figure of the PPO paper, drawn from the student's function: L^CLIP against r
    for A > 0 and A < 0 (|A| = ``advantage``), r*A dashed, the clip region shaded, and the
    stretches where the gradient is zero in red."""
    ratios = np.linspace(0.0, 2.5, 251)
    magnitude = abs(advantage) or 1.0
    if axes is None:
        _, axes = figure_output.panels(2, (9.5, 3.6))
    drawn = {"ratio": ratios, "clip_epsilon": clip_epsilon}
    for ax, sign, label in ((axes[0], +1, L("A > 0")), (axes[1], -1, L("A < 0"))):
        a = sign * magnitude
        values, grads = ppo_curve(ppo_clipped_objective, ratios, a, clip_epsilon)
        flat = np.isclose(grads, 0.0)
        ax.axvspan(1 - clip_epsilon, 1 + clip_epsilon, color=CLIP_COLOR, alpha=0.10, label=L("trust region [1-eps, 1+eps]"))
        ax.plot(ratios, ratios * a, "--", color=UNCLIPPED_COLOR, label=L("unclipped r * A"))
        ax.plot(ratios, values, color=CLIP_COLOR, lw=2.2, label=L("your L^CLIP"))
        ax.plot(ratios, np.where(flat, values, np.nan), color=FLAT_COLOR, lw=3.5, label=L("gradient = 0"))
        ax.axvline(1.0, color="black", lw=0.6)
        ax.set(title=L("{label} (A = {a:+.2f}, eps = {eps:.2f})", label=label, a=a, eps=clip_epsilon),
               xlabel=L("probability ratio r = pi / pi_old"), ylabel=L("per-token objective"))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left" if sign > 0 else "lower left")
        key = "positive" if sign > 0 else "negative"
        drawn[f"objective_{key}"], drawn[f"gradient_{key}"] = values, grads
    return drawn


# ----------------------------------------------------------------------------- DPO

def dpo_curve(dpo_loss: Callable, margins: np.ndarray, beta: float):
    """Loss and gradient weight sigma(-beta*h) = -(d loss / d log_p_w) / beta, per margin h."""
    log_p_w = torch.tensor(margins, dtype=torch.float64, requires_grad=True)
    zeros = torch.zeros_like(log_p_w.detach())
    loss = _call(dpo_loss, log_p_w, zeros, zeros, zeros, beta)
    loss.sum().backward()
    weight = -log_p_w.grad.numpy() / beta if log_p_w.grad is not None else np.zeros_like(margins)
    return loss.detach().numpy(), weight


SAME_LOSS = 0.3  # nats: the DPO explorer marks where each beta's loss reaches it


def margin_at_loss(margins: np.ndarray, loss: np.ndarray, level: float = SAME_LOSS) -> float:
    """The margin h at which a loss curve, falling in h, reaches ``level`` (linear interpolation; nan if never)."""
    if not (loss.min() <= level <= loss.max()):
        return float("nan")
    order = np.argsort(loss)
    return float(np.interp(level, loss[order], margins[order]))


def plot_dpo_loss(dpo_loss: Callable, beta: float = 0.1, compare_betas=(0.05, 0.5), axes=None) -> dict:
    """Loss, gradient weight and implied reward difference against the log-ratio margin h, for the
    slider's beta (thick) and a few others (thin).  On the loss panel a dot marks where each curve reaches
    the same loss: a larger beta gets there at a smaller margin (less drift from the reference)."""
    margins = np.linspace(-40, 40, 401)
    if axes is None:
        _, axes = figure_output.panels(3, (12, 3.6))
    drawn = {"margin": margins, "beta": beta}
    betas = [beta] + [b for b in compare_betas if not np.isclose(b, beta)]
    for index, b in enumerate(betas):
        loss, weight = dpo_curve(dpo_loss, margins, b)
        style = dict(lw=2.4) if index == 0 else dict(lw=1.0, alpha=0.7, ls="--")
        label = f"beta = {round(b, BETA_DECIMALS):g}"  # as the slider reads it
        axes[0].plot(margins, loss, label=label, **style)
        axes[1].plot(margins, weight, label=label, **style)
        axes[2].plot(margins, b * margins, label=label, **style)
        drawn[f"loss@{b:g}"], drawn[f"weight@{b:g}"] = loss, weight
        drawn[f"margin_at_same_loss@{b:g}"] = h_same = margin_at_loss(margins, loss)
        color = axes[0].get_lines()[-1].get_color()
        axes[0].plot([h_same], [SAME_LOSS], "o", color=color, mec="black", ms=7 if index == 0 else 5)
    axes[0].axhline(SAME_LOSS, color="black", lw=0.6, ls=":", label=L("same loss, {loss:g} nats", loss=SAME_LOSS))
    axes[0].set(title=L("Your DPO loss"), ylabel=L("loss -log sigmoid(beta h) (nats)"), ylim=(-0.2, 5.0))
    axes[1].set(title=L("How hard each pair is pushed"), ylabel=L("gradient weight sigmoid(-beta h)"), ylim=(-0.05, 1.05))
    axes[2].set(title=L("Implied reward difference"), ylabel="r(y_w) - r(y_l) = beta h")
    for ax in axes:
        ax.set_xlabel(L("log-ratio margin h (nats)"))
        ax.axvline(0, color="black", lw=0.6)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return drawn


# ----------------------------------------------------------------------------- GAE

GUIDE_EPISODE = (torch.tensor([0.0, 0.0, 0.0, 0.0, 10.0]), torch.ones(5))


def _long_episode(length: int = 30):
    """A sparse terminal reward with a value head that has learned part of it (rising values)."""
    rewards = torch.zeros(length)
    rewards[-1] = 10.0
    values = torch.linspace(2.0, 8.0, length) + 0.8 * torch.sin(torch.arange(length) * 0.7)
    return rewards, values


def gae_advantages(compute_gae: Callable, rewards, values, gamma: float, gae_lambda: float) -> np.ndarray:
    out = _call(compute_gae, rewards.clone(), values.clone(), 0.0, gamma, gae_lambda)
    return out.detach().numpy()


def _first_advantages(compute_gae: Callable, rewards: list, values: list, gamma: float, gae_lambda: float) -> np.ndarray:
    """A_0 of each episode (draws,), as one call per episode gives it: one vmapped call over the episodes when the
    function allows it and agrees with its direct calls on two of them, else one call per episode."""
    from torch.func import vmap

    def one(r, v):
        return compute_gae(r, v, 0.0, gamma, gae_lambda)
    batch = _batched(lambda: vmap(one)(torch.stack(rewards), torch.stack(values)))
    if batch is not None and tuple(batch.shape) == (len(rewards), len(rewards[0])):
        first = batch.detach().numpy()[:, 0]
        checks = (0, len(rewards) - 1)
        if all(np.isclose(first[i], gae_advantages(compute_gae, rewards[i], values[i], gamma, gae_lambda)[0],
                          rtol=1e-9, atol=1e-12) for i in checks):
            return first
    return np.array([gae_advantages(compute_gae, r, v, gamma, gae_lambda)[0] for r, v in zip(rewards, values)])


@functools.lru_cache(maxsize=16)
def _bias_variance(compute_gae: Callable, gamma: float, draws: int = 150, length: int = 12):
    """Bias and spread of A_0 across lambda, over noisy rewards and noisy, shrunken value estimates.

    Truth: a terminal reward of 5 plus zero-mean noise on every step, so V(s_t) = 5 gamma^(T-1-t).
    Estimates: 0.6 V + noise (an under-trained value head).  The target is E[G_0] - E[V_hat(s_0)],
    which lambda = 1 estimates without bias; smaller lambda leans on V_hat and inherits its error.
    Each episode's noise comes with its mirror image (draws / 2 antithetic pairs), so the noise averages to exactly
    zero: for GAE, linear in rewards and values, the mean over draws is the expectation itself and the bias drawn
    is the estimator's, not the sampling error of independent draws (about 0.3 at lambda = 1 with 150 of them).
    """
    generator = torch.Generator().manual_seed(0)
    steps = torch.arange(length, dtype=torch.float64)
    true_values = 5.0 * gamma ** (length - 1 - steps)
    terminal = torch.zeros(length, dtype=torch.float64)
    terminal[-1] = 5.0
    lambdas = np.linspace(0.0, 1.0, 11)
    all_rewards, all_values = [], []
    for m in range(draws // 2):  # drawn in this order so that every student's figure shows the same episodes
        reward_noise = torch.randn(length, generator=generator, dtype=torch.float64)
        value_noise = 0.5 * torch.randn(length, generator=generator, dtype=torch.float64)
        for sign in (1.0, -1.0):
            all_rewards.append(terminal + sign * reward_noise)
            all_values.append(0.6 * true_values + sign * value_noise)
    estimates = np.stack([_first_advantages(compute_gae, all_rewards, all_values, gamma, float(lam))
                          for lam in lambdas])  # (lambdas, draws)
    target = 0.4 * true_values[0].item()  # E[G_0] - E[V_hat(s_0)] = V(s_0) - 0.6 V(s_0)
    return lambdas, estimates.mean(1) - target, estimates.std(1)


def plot_gae(compute_gae: Callable, gae_lambda: float = 0.95, gamma: float = 0.99, axes=None) -> dict:
    """Advantages over time for the guide's 5-step episode and a 30-step one, with your function's
    lambda = 0 and lambda = 1 limits; and the bias/spread of A_0 as lambda moves."""
    if axes is None:
        _, axes = figure_output.panels(3, (12, 3.6))
    drawn = {"gae_lambda": gae_lambda, "gamma": gamma}
    for ax, (name, (rewards, values)) in zip(axes, (("guide", GUIDE_EPISODE), ("long", _long_episode()))):
        t = np.arange(len(rewards))
        advantages = gae_advantages(compute_gae, rewards, values, gamma, gae_lambda)
        td_residuals = gae_advantages(compute_gae, rewards, values, gamma, 0.0)
        returns_minus_values = gae_advantages(compute_gae, rewards, values, gamma, 1.0)
        ax.plot(t, td_residuals, ":", color="tab:gray", label=L("lambda = 0 (TD residual)"))
        ax.plot(t, returns_minus_values, "--", color="tab:gray", label=L("lambda = 1 (return - V)"))
        ax.plot(t, advantages, "o-", color="tab:green", lw=2, label=f"lambda = {gae_lambda:.2f}")
        ax.set(title=L("Guide example: reward 10 at the end" if name == "guide" else "A 30-token answer: reward 10 at the end"),
               xlabel=L("time step t (token)"), ylabel=L("advantage A_t"))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        drawn[f"advantages_{name}"] = advantages
        drawn[f"lambda_0_{name}"], drawn[f"lambda_1_{name}"] = td_residuals, returns_minus_values
    lambdas, bias, spread = _bias_variance(compute_gae, gamma)
    ax = axes[2]
    ax.plot(lambdas, np.abs(bias), "o-", color="tab:orange", label=L("|bias| of A_0"))
    ax.plot(lambdas, spread, "s-", color="tab:purple", label=L("spread (std) of A_0"))
    ax.axvline(gae_lambda, color="tab:green", lw=2, alpha=0.6, label=L("your lambda"))
    ax.set(title=L("Bias against variance"), xlabel="lambda", ylabel=L("reward units"))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    drawn.update(bias_lambdas=lambdas, bias=bias, spread=spread)
    return drawn


# ----------------------------------------------------------------------------- widgets

def _under_nbgrader() -> bool:
    return bool(os.environ.get("NBGRADER_EXECUTION"))


def _explorer(plot: Callable, probe: Callable, student_function: Callable, sliders: Callable):
    """A friendly line while the function is not ready; one line under nbgrader; otherwise an
    ipywidgets.interactive that redraws on every slider change.  ``sliders(ipywidgets)`` builds the
    sliders by keyword."""
    try:
        probe(student_function)
    except NotReady as exc:
        if _under_nbgrader():  # a page of text outputs (feedback, the Formgrader) would show the widget's repr
            print(exc)
            return None
        import ipywidgets as widgets
        return widgets.HTML(f"<b>{exc}</b>")
    if _under_nbgrader():  # validate and autograde stay fast: not even ipywidgets is imported
        print(t("(explorer skipped while nbgrader runs this notebook)"))
        return None
    import ipywidgets as widgets
    controls = sliders(widgets)
    first = {name: control.value for name, control in controls.items()}  # the values the class's cache holds

    def redraw(**values):
        drawn = plot(student_function, **values)  # always the student's function: the cache skips pixels only
        cached = None
        if values == first:
            def cached(figure):
                return first_figures.cached_png(figure, plot.__name__, values, drawn, plot_language())
        figure_output.show(cached_png=cached)
        return drawn

    explorer = widgets.interactive(redraw, **controls)
    # While a training holds the kernel the sliders wait: a line between them and the plot says so
    status = widgets.HTML(layout=widgets.Layout(display="none"))
    status.add_class(training_notice.NOTICE_CLASS)
    controls_and_plot = list(explorer.children)
    controls_and_plot.insert(controls_and_plot.index(explorer.out), status)
    explorer.children = tuple(controls_and_plot)
    training_notice.register(status)
    return explorer


def ppo_sliders(widgets) -> dict:
    return {
        "clip_epsilon": widgets.FloatSlider(value=0.2, min=0.0, max=0.8, step=0.05, description="epsilon"),
        "advantage": widgets.FloatSlider(value=1.0, min=0.25, max=2.0, step=0.25, description="|A|"),
    }


def dpo_sliders(widgets) -> dict:
    return {"beta": widgets.FloatLogSlider(value=0.1, base=10, min=-2, max=0.5, step=0.1, description="beta",
                                            readout_format=f".{BETA_DECIMALS}f")}


def gae_sliders(widgets) -> dict:
    return {
        "gae_lambda": widgets.FloatSlider(value=0.95, min=0.0, max=1.0, step=0.05, description="lambda",
                                          continuous_update=False),
        "gamma": widgets.FloatSlider(value=0.99, min=0.8, max=1.0, step=0.01, description="gamma",
                                     continuous_update=False),
    }


# The notebook's three explorers: the student function each draws, its plot and its sliders
# (rlhf_course/first_figures.py caches their first figures, the sliders at these values)
EXPLORERS = {"ppo_clipped_objective": (plot_ppo_objective, ppo_sliders),
             "dpo_loss": (plot_dpo_loss, dpo_sliders),
             "compute_gae": (plot_gae, gae_sliders)}


def ppo_explorer(ppo_clipped_objective: Callable):
    probe = lambda f: ppo_curve(f, np.array([1.0]), 1.0, 0.2)  # noqa: E731
    return _explorer(plot_ppo_objective, probe, ppo_clipped_objective, ppo_sliders)


def dpo_explorer(dpo_loss: Callable):
    probe = lambda f: dpo_curve(f, np.array([0.0, 1.0]), 0.1)  # noqa: E731
    return _explorer(plot_dpo_loss, probe, dpo_loss, dpo_sliders)


def gae_explorer(compute_gae: Callable):
    probe = lambda f: gae_advantages(f, *GUIDE_EPISODE, 0.99, 0.95)  # noqa: E731
    return _explorer(plot_gae, probe, compute_gae, gae_sliders)


# ----------------------------------------------------------------------------- GRPO

# Three prompts' groups of reward-model scores: one the policy nearly always gets right, one it nearly
# always gets wrong (both with little spread), one it answers unevenly.
GRPO_PROMPTS = (("easy prompt", 0.9, 0.05), ("uneven prompt", 0.5, 0.4), ("hard prompt", 0.1, 0.05))
BANDIT_PROBS = (0.4, 0.3, 0.2, 0.1)        # the policy over four responses
BANDIT_REWARDS = (3.0, 2.2, 1.5, 2.6)      # their mean rewards: a reward model's scores carry an offset
GROUP_SIZES = (2, 3, 4, 6, 8, 12, 16, 24, 32)


def grpo_groups(group_relative_advantages: Callable, group_size: int, scale_by_std: bool):
    """Rewards (3, G) for the three prompts of :data:`GRPO_PROMPTS` and your advantages of them."""
    generator = torch.Generator().manual_seed(0)
    rewards = torch.stack([mean + spread * torch.randn(group_size, generator=generator, dtype=torch.float64)
                           for _, mean, spread in GRPO_PROMPTS])
    advantages = _call(group_relative_advantages, rewards.clone(), scale_by_std, 1e-4)
    return rewards.numpy(), advantages.detach().numpy()


@functools.lru_cache(maxsize=64)
def grpo_gradient_estimates(group_relative_advantages: Callable, scale_by_std: bool, reward_noise: float,
                            draws: int = 2000):
    """A one-step policy (softmax over four responses) and the policy-gradient estimate one group of G
    samples gives, g = (1/G) sum_i A_i grad log pi(a_i), over ``draws`` groups for each G.

    For each G: the estimate's noise relative to its mean, ||std|| / ||E g||, and its mean step along the
    true gradient, E[g] . grad J / ||grad J||^2 (1 for plain REINFORCE, which has no baseline), for raw
    rewards (no baseline) and for your advantages.  Your function is called once per G on all draws."""
    probs = torch.tensor(BANDIT_PROBS, dtype=torch.float64)
    means = torch.tensor(BANDIT_REWARDS, dtype=torch.float64)
    score = torch.eye(len(probs), dtype=torch.float64) - probs  # grad_theta log pi(a) for each a, rows
    true_gradient = (probs * means) @ score
    generator = torch.Generator().manual_seed(1)
    rows = {"no baseline": ([], []), "your advantages": ([], [])}
    for group in GROUP_SIZES:
        actions = torch.multinomial(probs.expand(draws, -1), group, replacement=True, generator=generator)
        rewards = means[actions] + reward_noise * torch.randn(draws, group, generator=generator, dtype=torch.float64)
        advantages = _call(group_relative_advantages, rewards.clone(), scale_by_std, 1e-4).detach().double()
        for name, weights in (("no baseline", rewards), ("your advantages", advantages)):
            estimates = (weights.unsqueeze(-1) * score[actions]).mean(1)  # (draws, actions)
            mean = estimates.mean(0)
            noise = estimates.std(0).norm() / mean.norm().clamp_min(1e-12)
            step = (mean @ true_gradient) / (true_gradient @ true_gradient)
            rows[name][0].append(noise.item())
            rows[name][1].append(step.item())
    return np.array(GROUP_SIZES), {name: (np.array(a), np.array(b)) for name, (a, b) in rows.items()}


def plot_grpo_advantages(group_relative_advantages: Callable, group_size: int = 8, scale_by_std: bool = True,
                         reward_noise: float = 0.5, axes=None) -> dict:
    """Your advantages for an easy, an uneven and a hard prompt's group; the noise of the policy gradient
    one group gives, against G; and its mean step along the true gradient, with the (G - 1) / G of a
    group mean that includes the response itself."""
    if axes is None:
        _, axes = figure_output.panels(3, (13, 3.8), title_lines=2)
    rewards, advantages = grpo_groups(group_relative_advantages, group_size, scale_by_std)
    ax = axes[0]
    for (name, _, _), r, a, marker in zip(GRPO_PROMPTS, rewards, advantages, "o^s"):
        ax.scatter(r, a, marker=marker, label=L(name), alpha=0.8)
    ax.axhline(0, color="black", lw=0.6)
    ax.set(title=L("Your advantages\nG = {g}, {form}", g=group_size,
                   form=L("scaled by the group std") if scale_by_std else L("unscaled (Dr. GRPO)")),
           xlabel=L("reward-model score of the response"), ylabel=L("advantage"))
    ax.legend(fontsize=8)
    sizes, rows = grpo_gradient_estimates(group_relative_advantages, bool(scale_by_std), float(reward_noise))
    styles = {"no baseline": ("--", "tab:gray"), "your advantages": ("o-", "tab:green")}
    for name, (noise, step) in rows.items():
        style, color = styles[name]
        axes[1].plot(sizes, noise, style, color=color, label=L(name))
        axes[2].plot(sizes, step, style, color=color, label=L(name))
    axes[2].plot(sizes, (sizes - 1) / sizes, ":", color="black", label=L("(G - 1) / G: the unscaled group mean"))
    for ax in axes[1:]:
        ax.axvline(group_size, color="tab:green", alpha=0.3, lw=4)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [str(s) for s in sizes])
        ax.set_xlabel(L("group size G"))
        ax.legend(fontsize=8)
    axes[1].set(title=L("Noise of one group's gradient estimate"), ylabel=L("||std|| / ||mean|| over 2000 groups"),
                yscale="log")
    axes[2].set(title=L("Mean step along the true gradient"), ylabel=L("E[g] . grad J / ||grad J||^2"))
    for ax in axes:
        ax.grid(alpha=0.3)
    return {"rewards": rewards, "advantages": advantages, "group_sizes": sizes,
            **{f"{name}_{kind}": values for name, pair in rows.items() for kind, values in zip(("noise", "step"), pair)}}


def grpo_explorer(group_relative_advantages: Callable):
    def sliders(widgets):
        return {
            "group_size": widgets.IntSlider(value=8, min=2, max=32, step=1, description="G", continuous_update=False),
            "scale_by_std": widgets.Checkbox(value=True, description="scale_by_std"),
            "reward_noise": widgets.FloatSlider(value=0.5, min=0.0, max=2.0, step=0.1, description=t("reward noise"),
                                                continuous_update=False),
        }
    probe = lambda f: grpo_groups(f, 4, True)  # noqa: E731
    return _explorer(plot_grpo_advantages, probe, group_relative_advantages, sliders)

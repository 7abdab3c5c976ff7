"""The visible test cells' messages help a student who got it wrong.  Validate (the toolbar button and
`nbgrader validate`) shows only the failing cell's traceback, not what the cell printed before it: each assertion
message carries the student's value and the expected one, and where the student's value is what a usual mistake gives
on the visible inputs, it says which mistake that is.  Each visible cell, of the English source and of its Chinese
edition, runs here in-process against wrong functions (the catalogues' and others) and against the reference; every
value a message names as a mistake's is one such function's output, every formula and number it states is computed
below, and every entry of a cell's table of mistakes is reached by one of the wrong functions."""
from __future__ import annotations

import ast
import contextlib
import io
import math
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F

from rlhf_course.course import notebooks
from rlhf_course.grading import instructor, misconceptions
from tests.support.course import REPO, repo_course

NOTEBOOKS = {"rlhf": "rlhf_building_blocks.ipynb", "kl_penalty": "kl_penalty.ipynb", "grpo": "grpo.ipynb"}
VISIBLE_CELL = {"ppo_clipped_objective": ("rlhf", "ppo_visible_tests"), "dpo_loss": ("rlhf", "dpo_visible_tests"),
                "compute_gae": ("rlhf", "gae_visible_tests"), "kl_estimator_k3": ("kl_penalty", "kl_visible_tests"),
                "group_relative_advantages": ("grpo", "grpo_visible_tests")}
ANSWER_CELL = {"ppo_clipped_objective": "ppo_answer", "dpo_loss": "dpo_answer", "compute_gae": "gae_answer",
               "kl_estimator_k3": "kl_answer", "group_relative_advantages": "grpo_answer"}
EDITIONS = ("", "_zh")
CATALOGUES = {base: instructor.load_module(repo_course(), misconceptions.catalogue_module_name(base)) for base in NOTEBOOKS}


def visible_cell(function: str, edition: str) -> str:
    """The source of the function's visible test cell in source/<assignment><edition>/."""
    base, grade_id = VISIBLE_CELL[function]
    nb = notebooks.read(REPO / "source" / f"{base}{edition}" / NOTEBOOKS[base])
    return notebooks.cells_by_grade_id(nb)[grade_id].source


def answer(function: str) -> str:
    """The reference solution's answer cell of the function (the English source's)."""
    base, _ = VISIBLE_CELL[function]
    nb = notebooks.read(REPO / "source" / base / NOTEBOOKS[base])
    return notebooks.solution_answers(nb)[ANSWER_CELL[function]]


def failure(cell: str, function_source: str) -> str | None:
    """The message of the AssertionError the visible cell stops with when its function is function_source (None when
    the cell passes); its printing is not shown.  The cell runs as in the notebook: math, torch and F imported."""
    namespace = {"math": math, "torch": torch, "F": F}
    exec(function_source, namespace)
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            exec(compile(cell, "<visible test>", "exec"), namespace)
        except AssertionError as error:
            return str(error)
    return None


def tables(cell: str) -> list[dict]:
    """The cell's tables of usual mistakes, in order: each {value the mistake gives: the sentence naming it}, a dict
    literal inside an assertion message, looked up with the student's rounded value."""
    found = []
    for node in ast.walk(ast.parse(cell)):
        if isinstance(node, ast.Assert) and node.msg is not None:
            found += [ast.literal_eval(inner) for inner in ast.walk(node.msg) if isinstance(inner, ast.Dict)]
    return found


@dataclass(frozen=True)
class Mistake:
    name: str
    function: str
    source: str
    shows: tuple[str, ...]             # in the message of both editions: the student's value(s) and the expected one
    entry: tuple[int, object] | None   # (table index, value): the entry of the cell's tables that must name it


def catalogued(base: str, name: str) -> str:
    return CATALOGUES[base].WRONG_BY_NAME[name].source


def ppo(body: str) -> str:
    return f"def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):\n{body}"


def dpo(body: str) -> str:
    return f"def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):\n{body}"


def gae(next_v: str = "next_value", delta: str = "rewards[t] + gamma * next_v - values[t]",
        update: str = "delta + gamma * gae_lambda * gae", steps: str = "reversed(range(T))",
        returned: str = "advantages") -> str:
    """A loop GAE with one piece written otherwise (each default is the reference's)."""
    return f'''def compute_gae(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
    T = len(rewards)
    advantages = torch.zeros_like(rewards)
    gae = 0.0
    for t in {steps}:
        next_v = {next_v} if t == T - 1 else values[t + 1]
        delta = {delta}
        gae = {update}
        advantages[t] = gae
    return {returned}
'''


def kl(body: str) -> str:
    return f"def kl_estimator_k3(log_p, ref_log_p):\n{body}"


def grpo(centred: str = "rewards - rewards.mean(dim=1, keepdim=True)",
         scaled: str = "centred / (rewards.std(dim=1, keepdim=True) + eps)", unscaled: str = "centred") -> str:
    return f'''def group_relative_advantages(rewards, scale_by_std=True, eps=1e-4):
    centred = {centred}
    if not scale_by_std:
        return {unscaled}
    return {scaled}
'''


CLAMP = "torch.clamp(ratio, 1 - clip_epsilon, 1 + clip_epsilon)"
MARGIN = "    z = beta * ((log_p_w - ref_log_p_w) - (log_p_l - ref_log_p_l))\n"
MISTAKES = [
    # PPO: the brief's max for min, a clipped A, a wrong sign; then the catalogue's and others
    Mistake("ppo_max_instead_of_min", "ppo_clipped_objective", catalogued("rlhf", "ppo_max_instead_of_min"),
            ("1.6600", "1.0200"), (0, 1.66)),
    Mistake("ppo_clips_the_advantage", "ppo_clipped_objective",
            ppo("    return torch.min(ratio * advantage, ratio * torch.clamp(advantage, 0.8, 1.2)).mean()\n"),
            ("1.6000", "1.0200"), (0, 1.6)),
    Mistake("ppo_returns_the_loss", "ppo_clipped_objective", catalogued("rlhf", "ppo_returns_the_loss"),
            ("-1.0200", "1.0200"), (0, -1.02)),
    Mistake("ppo_wrong_sign_on_the_clipped_term", "ppo_clipped_objective",
            ppo(f"    return torch.min(ratio * advantage, -{CLAMP} * advantage).mean()\n"), ("-1.0800", "1.0200"), (0, -1.08)),
    Mistake("ppo_no_clipping", "ppo_clipped_objective", catalogued("rlhf", "ppo_no_clipping"), ("1.6000",), (0, 1.6)),
    Mistake("ppo_clip_without_min", "ppo_clipped_objective", catalogued("rlhf", "ppo_clip_without_min"),
            ("1.0800",), (0, 1.08)),
    Mistake("ppo_sum_instead_of_mean", "ppo_clipped_objective", catalogued("rlhf", "ppo_sum_instead_of_mean"),
            ("5.1000",), (0, 5.1)),
    Mistake("ppo_min_of_ratios", "ppo_clipped_objective", catalogued("rlhf", "ppo_min_of_ratios"),
            ("-1.0200", "-1.6600"), (1, -1.02)),
    Mistake("ppo_lower_bound_is_eps", "ppo_clipped_objective",
            ppo("    return torch.min(ratio * advantage, torch.clamp(ratio, clip_epsilon, 1 + clip_epsilon) * advantage)"
                ".mean()\n"), ("-1.6000", "-1.6600"), (1, -1.6)),
    Mistake("ppo_abs_advantage_in_the_clipped_term", "ppo_clipped_objective",
            ppo(f"    return torch.min(ratio * advantage, {CLAMP} * advantage.abs()).mean()\n"), ("-1.6000",), (1, -1.6)),
    Mistake("ppo_clips_the_log_ratio", "ppo_clipped_objective",
            ppo("    clipped = torch.exp(torch.clamp(torch.log(ratio), -clip_epsilon, clip_epsilon))\n"
                "    return torch.min(ratio * advantage, clipped * advantage).mean()\n"), ("1.0328", "1.0200"), None),
    Mistake("ppo_clamps_ratio_in_place", "ppo_clipped_objective", catalogued("rlhf", "ppo_clamps_ratio_in_place"),
            ("[0.8, 1.0, 1.2, 1.2, 1.2]",), None),
    Mistake("ppo_no_reduction", "ppo_clipped_objective",
            ppo(f"    return torch.min(ratio * advantage, {CLAMP} * advantage)\n"), ("(5,)",), None),
    # DPO: the two unstable forms (the message must be true for both), then the margin's and the loss's mistakes
    Mistake("dpo_naive_log_sigmoid", "dpo_loss", catalogued("rlhf", "dpo_naive_log_sigmoid"),
            ("inf", "200.0000", "sigmoid(-200)", "exp(200)", "F.logsigmoid"), None),
    Mistake("dpo_log1p_of_exp", "dpo_loss", dpo(MARGIN + "    return torch.log1p(torch.exp(-z))\n"),
            ("inf", "200.0000", "sigmoid(-200)", "exp(200)", "F.logsigmoid"), None),
    Mistake("dpo_log_of_one_plus_exp", "dpo_loss", dpo(MARGIN + "    return torch.log(1 + torch.exp(-z))\n"),
            ("inf", "200.0000", "exp(200)"), None),
    Mistake("dpo_epsilon_inside_the_log", "dpo_loss", dpo(MARGIN + "    return -torch.log(torch.sigmoid(z) + 1e-8)\n"),
            ("18.4207", "200.0000"), None),
    Mistake("dpo_stable_only_by_branch", "dpo_loss",
            dpo(MARGIN + "    return torch.where(z >= 0, torch.log1p(torch.exp(-z)), -z + torch.log1p(torch.exp(z)))\n"),
            ("d loss / d log_p_w", "nan", "-0.1", "torch.where", "0 * inf"), None),
    Mistake("dpo_no_grad_on_policy", "dpo_loss", catalogued("rlhf", "dpo_no_grad_on_policy"),
            ("requires_grad=False", "torch.no_grad"), None),
    Mistake("dpo_margin_through_a_new_tensor", "dpo_loss",
            dpo(MARGIN + "    return -F.logsigmoid(torch.tensor(z.item(), requires_grad=True))\n"),
            ("None", "-0.1", ".detach()"), None),
    Mistake("dpo_missing_beta", "dpo_loss", catalogued("rlhf", "dpo_missing_beta"), ("0.0486", "0.5544"), (0, 0.0486)),
    Mistake("dpo_beta_outside_the_sigmoid", "dpo_loss", catalogued("rlhf", "dpo_beta_outside_the_sigmoid"),
            ("0.0049",), (0, 0.0049)),
    Mistake("dpo_swapped_margin", "dpo_loss", dpo(MARGIN + "    return -F.logsigmoid(-z)\n"), ("0.8544",), (0, 0.8544)),
    Mistake("dpo_one_minus_sigmoid", "dpo_loss", dpo(MARGIN + "    return 1 - torch.sigmoid(z)\n"),
            ("0.4256",), (0, 0.4256)),
    Mistake("dpo_wrong_sign_of_the_loss", "dpo_loss", dpo(MARGIN + "    return F.logsigmoid(z)\n"),
            ("-0.5544",), (0, -0.5544)),
    Mistake("dpo_absolute_margin", "dpo_loss", dpo(MARGIN + "    return -F.logsigmoid(z.abs())\n"),
            ("0.5544", "0.8544"), None),
    # GAE: the brief's last step first (bootstrapping from values[-1]), forward recursion, a missing gamma * lambda,
    # lambda and gamma swapped; then others
    Mistake("gae_bootstraps_from_last_value", "compute_gae", catalogued("rlhf", "gae_bootstraps_from_last_value"),
            ("9.99", "9.0"), (0, 9.99)),
    Mistake("gae_forward_recursion", "compute_gae", catalogued("rlhf", "gae_forward_recursion"),
            ("8.9656", "9.0"), (0, 8.9656)),
    Mistake("gae_no_gamma_lambda_factor", "compute_gae", gae(update="delta + gae"), ("8.99", "8.4545"), (1, 8.99)),
    Mistake("gae_lambda_and_gamma_swapped", "compute_gae",
            gae(delta="rewards[t] + gae_lambda * next_v - values[t]", update="delta + gae_lambda * gamma * gae"),
            ("8.4145", "8.4545"), (1, 8.4145)),
    Mistake("gae_no_recursion", "compute_gae", gae(update="delta"), ("-0.01",), (1, -0.01)),
    Mistake("gae_forward_reading_the_next_advantage", "compute_gae", '''
def compute_gae(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
    T = len(rewards)
    advantages = torch.zeros_like(rewards)
    for t in range(T):
        next_v = next_value if t == T - 1 else values[t + 1]
        later = advantages[t + 1] if t < T - 1 else 0.0  # still 0: computed after this step
        advantages[t] = rewards[t] + gamma * next_v - values[t] + gamma * gae_lambda * later
    return advantages
''', ("-0.01",), (1, -0.01)),
    Mistake("gae_forgets_lambda", "compute_gae", catalogued("rlhf", "gae_forgets_lambda"), ("8.9",), (1, 8.9)),
    Mistake("gae_gamma_left_out_of_the_recursion", "compute_gae", gae(update="delta + gae_lambda * gae"),
            ("8.54",), (1, 8.54)),
    Mistake("gae_returns_the_returns", "compute_gae", gae(returned="advantages + values"), ("10.0",), (0, 10.0)),
    Mistake("gae_no_value_subtracted", "compute_gae", gae(delta="rewards[t] + gamma * next_v"), ("10.0",), (0, 10.0)),
    Mistake("gae_stores_before_the_update", "compute_gae", '''
def compute_gae(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
    T = len(rewards)
    advantages = torch.zeros_like(rewards)
    gae = 0.0
    for t in reversed(range(T)):
        next_v = next_value if t == T - 1 else values[t + 1]
        advantages[t] = gae
        gae = rewards[t] + gamma * next_v - values[t] + gamma * gae_lambda * gae
    return advantages
''', ("0.0",), (0, 0.0)),
    Mistake("gae_loop_stops_before_the_first_step", "compute_gae", gae(steps="reversed(range(1, T))"),
            ("[0.0, 7.4589", "7.0051"), None),
    # KL: k1 / k2 / k3 confused, the ratio upside down, signs
    Mistake("kl_k1_instead_of_k3", "kl_estimator_k3", catalogued("kl_penalty", "kl_k1_instead_of_k3"),
            ("[0.6931, -0.6931, 0.0]", "[0.1931, 0.3069, 0.0]"), (0, (0.6931, -0.6931, 0.0))),
    Mistake("kl_log_r_as_k1", "kl_estimator_k3", kl("    return ref_log_p - log_p\n"),
            ("[-0.6931, 0.6931, 0.0]",), (0, (-0.6931, 0.6931, 0.0))),
    Mistake("kl_k2_instead_of_k3", "kl_estimator_k3", catalogued("kl_penalty", "kl_k2_instead_of_k3"),
            ("[0.2402, 0.2402, 0.0]",), (0, (0.2402, 0.2402, 0.0))),
    Mistake("kl_ratio_the_wrong_way", "kl_estimator_k3", catalogued("kl_penalty", "kl_ratio_the_wrong_way"),
            ("[0.3069, 0.1931, 0.0]",), (0, (0.3069, 0.1931, 0.0))),
    Mistake("kl_negated_k3", "kl_estimator_k3", kl("    d = ref_log_p - log_p\n    return d - torch.expm1(d)\n"),
            ("[-0.1931, -0.3069, 0.0]",), (0, (-0.1931, -0.3069, 0.0))),
    Mistake("kl_r_minus_log_r", "kl_estimator_k3", kl("    r = torch.exp(ref_log_p - log_p)\n    return r - torch.log(r)\n"),
            ("[1.1931, 1.3069, 1.0]",), (0, (1.1931, 1.3069, 1.0))),
    Mistake("kl_half_k3", "kl_estimator_k3", kl("    d = ref_log_p - log_p\n    return 0.5 * (torch.expm1(d) - d)\n"),
            ("[0.0966, 0.1534, 0.0]", "[0.1931, 0.3069, 0.0]"), None),
    Mistake("kl_mean_over_tokens", "kl_estimator_k3", catalogued("kl_penalty", "kl_mean_over_tokens"), ("()",), None),
    Mistake("kl_in_place", "kl_estimator_k3", catalogued("kl_penalty", "kl_in_place"), ("[-0.6931, 0.6931, 0.0]",), None),
    Mistake("kl_plus_a_small_constant", "kl_estimator_k3",
            kl("    d = ref_log_p - log_p\n    return torch.expm1(d) - d + 1e-8\n"), ("1.0000e-08",), None),
    # GRPO: the std's and the mean's normalisation mistakes
    Mistake("grpo_population_std", "group_relative_advantages",
            grpo(scaled="centred / (rewards.std(dim=1, keepdim=True, unbiased=False) + eps)"),
            ("0.9998", "0.8659"), (1, 0.9998)),
    Mistake("grpo_population_std_by_hand", "group_relative_advantages",
            grpo(scaled="centred / (centred.pow(2).mean(dim=1, keepdim=True).sqrt() + eps)"), ("0.9998",), (1, 0.9998)),
    Mistake("grpo_divides_by_the_variance", "group_relative_advantages",
            grpo(scaled="centred / (rewards.var(dim=1, keepdim=True) + eps)"), ("1.4996",), (1, 1.4996)),
    Mistake("grpo_std_of_the_whole_batch", "group_relative_advantages", grpo(scaled="centred / (rewards.std() + eps)"),
            ("0.1843",), (1, 0.1843)),
    Mistake("grpo_never_scales", "group_relative_advantages", grpo(scaled="centred"), ("0.5", "0.8659"), (1, 0.5)),
    Mistake("grpo_batch_mean", "group_relative_advantages", catalogued("grpo", "grpo_batch_mean"),
            ("-1.25", "[[0.5, -0.5, -0.5, 0.5], [-3.0, -1.0, 0.0, 4.0]]"), (0, (-1.25, -2.25, -2.25, -1.25))),
    Mistake("grpo_over_the_prompts", "group_relative_advantages",
            grpo(centred="rewards - rewards.mean(dim=0, keepdim=True)",
                 scaled="centred / (rewards.std(dim=0, keepdim=True) + eps)"), ("-3.5",), (0, (0.0, -1.5, -2.0, -3.5))),
    Mistake("grpo_scales_whatever_the_flag", "group_relative_advantages",
            grpo(unscaled="centred / (rewards.std(dim=1, keepdim=True) + eps)"), ("0.8659",), (0, (0.8659, -0.8659, -0.8659, 0.8659))),
    Mistake("grpo_never_centres", "group_relative_advantages",
            grpo(centred="rewards"), ("[[1.0, 0.0, 0.0, 1.0], [1.0, 3.0, 4.0, 8.0]]",), (0, (1.0, 0.0, 0.0, 1.0))),
    Mistake("grpo_centres_in_place", "group_relative_advantages",
            grpo(centred="rewards.sub_(rewards.mean(dim=1, keepdim=True))"), ("[[0.5, -0.5, -0.5, 0.5]",), None),
    Mistake("grpo_eps_outside_the_division", "group_relative_advantages",
            grpo(scaled="centred / rewards.std(dim=1, keepdim=True) + eps"), ("0.8661", "0.8659"), None),
]
MISTAKE_IDS = [m.name for m in MISTAKES]


def test_the_mistakes_have_one_name_each():
    assert len(set(MISTAKE_IDS)) == len(MISTAKE_IDS)


@pytest.mark.parametrize("edition", EDITIONS, ids=["en", "zh"])
@pytest.mark.parametrize("function", VISIBLE_CELL)
def test_the_reference_passes_the_visible_cell(function, edition):
    assert failure(visible_cell(function, edition), answer(function)) is None


@pytest.mark.parametrize("edition", EDITIONS, ids=["en", "zh"])
@pytest.mark.parametrize("mistake", MISTAKES, ids=MISTAKE_IDS)
def test_a_wrong_function_is_told_what_it_gave_and_what_was_expected(mistake, edition):
    """The message names the student's value and the expected one; where a table of the cell names the student's
    value, exactly that entry is in the message (and none of the other entries of the cell's tables)."""
    cell = visible_cell(mistake.function, edition)
    message = failure(cell, mistake.source)
    assert message is not None, f"{mistake.name} passes the visible cell"
    for shown in mistake.shows:
        assert shown in message, (shown, message)
    entries = [(index, value, hint) for index, table in enumerate(tables(cell)) for value, hint in table.items()]
    said = [(index, value) for index, value, hint in entries if hint in message]
    assert said == ([mistake.entry] if mistake.entry else []), message
    assert (edition == "_zh") == any("\u4e00" <= ch <= "\u9fff" for ch in message), message


def test_every_entry_of_every_table_names_a_mistake_measured_here():
    """No table entry is dead text: each is what one of the wrong functions above gives; both editions' tables have
    the same values (the edition check compares them as code)."""
    for function in VISIBLE_CELL:
        english, chinese = (tables(visible_cell(function, edition)) for edition in EDITIONS)
        assert [list(table) for table in english] == [list(table) for table in chinese]
        reached = {m.entry for m in MISTAKES if m.function == function and m.entry}
        assert reached == {(index, value) for index, table in enumerate(english) for value in table}, function


def test_the_ppo_messages_numbers():
    """The per-token values and means the PPO messages state, at ratios [0.5, 1, 1.5, 2, 3] and eps = 0.2."""
    ratio = torch.tensor([0.5, 1.0, 1.5, 2.0, 3.0], dtype=torch.float64)
    clipped = ratio.clamp(0.8, 1.2)
    per_token = lambda a: torch.min(ratio * a, clipped * a)  # noqa: E731
    assert per_token(1.0).tolist() == pytest.approx([0.5, 1.0, 1.2, 1.2, 1.2])
    assert per_token(-1.0).tolist() == pytest.approx([-0.8, -1.0, -1.5, -2.0, -3.0])
    assert torch.max(ratio, clipped).tolist() == pytest.approx([0.8, 1.0, 1.5, 2.0, 3.0])
    assert clipped.tolist() == pytest.approx([0.8, 1.0, 1.2, 1.2, 1.2])
    assert [per_token(1.0).mean().item(), per_token(-1.0).mean().item()] == pytest.approx([1.02, -1.66])
    assert [torch.max(ratio, clipped).mean().item(), ratio.mean().item(), clipped.mean().item(),
            per_token(1.0).sum().item()] == pytest.approx([1.66, 1.6, 1.08, 5.1])
    assert (torch.min(ratio, clipped) * -1).mean().item() == pytest.approx(-1.02)
    assert min(-0.5, 0.8 * -1) == -0.8


def test_the_dpo_messages_numbers():
    """softplus at the visible margins, the mistakes' formulas, and float32 at beta * h = -200: sigmoid(-200) is 0 and
    exp(200) inf, F.logsigmoid and F.softplus give 200 with the gradient -beta * sigmoid(200) = -0.1."""
    h = (-2 + 3) - (-5 + 3)
    assert h == 3
    softplus = lambda x: math.log1p(math.exp(x))  # noqa: E731
    assert [round(softplus(-0.3), 4), round(softplus(0.3), 4)] == [0.5544, 0.8544]
    assert [round(softplus(-3), 4), round(0.1 * softplus(-3), 4)] == [0.0486, 0.0049]
    assert [round(1 - 1 / (1 + math.exp(-0.3)), 4), round(-softplus(-0.3), 4)] == [0.4256, -0.5544]
    z = torch.tensor(-200.0)
    assert torch.sigmoid(z).item() == 0.0 and torch.exp(-z).item() == math.inf
    assert -torch.log(torch.sigmoid(z)).item() == math.inf and torch.log1p(torch.exp(-z)).item() == math.inf
    for stable in (lambda x: -F.logsigmoid(x), lambda x: F.softplus(-x)):
        log_p_w = torch.tensor(-2000.0, requires_grad=True)
        loss = stable(0.1 * log_p_w)
        loss.backward()
        assert loss.item() == pytest.approx(200.0) and log_p_w.grad.item() == pytest.approx(-0.1)
        assert -0.1 * torch.sigmoid(torch.tensor(200.0)).item() == pytest.approx(-0.1)
    # torch.where's discarded branch: its gradient (0 * inf) is nan
    z = torch.tensor(-200.0, requires_grad=True)
    torch.where(z >= 0, torch.log1p(torch.exp(-z)), -z + torch.log1p(torch.exp(z))).backward()
    assert math.isnan(z.grad.item()) and math.isnan(0 * math.inf)


def test_the_gae_messages_numbers():
    """The last step, the next one, and what each mistake's formula gives there (V = 1, r_4 = 10, gamma = 0.99,
    lambda = 0.95, next_value = 0)."""
    gamma, lam = 0.99, 0.95
    assert 10 + gamma * 0 - 1 == 9.0
    assert round(10 + gamma * 1 - 1, 4) == 9.99  # bootstrapped from values[-1] = V(s_4) = 1
    delta_3 = 0 + gamma * 1 - 1
    assert round(delta_3, 4) == -0.01 and round(gamma * lam, 4) == 0.9405
    assert round(delta_3 + gamma * lam * 9, 4) == 8.4545
    assert [round(delta_3 + 9, 4), round(delta_3 + gamma * 9, 4), round(delta_3 + lam * 9, 4)] == [8.99, 8.9, 8.54]
    assert round((0 + lam * 1 - 1) + gamma * lam * 9, 4) == 8.4145
    forward = 0.0
    for delta in (delta_3,) * 4 + (9.0,):
        forward = delta + gamma * lam * forward
    assert round(forward, 4) == 8.9656
    assert 9 + 1 == 10.0


def test_the_kl_messages_numbers():
    """r = pi_ref / pi = [0.5, 2, 1] and the estimators' values the table names."""
    r = torch.tensor([0.25, 0.5, 0.25], dtype=torch.float64) / torch.tensor([0.5, 0.25, 0.25], dtype=torch.float64)
    assert r.tolist() == [0.5, 2.0, 1.0]
    rounded = lambda t: [round(v, 4) + 0.0 for v in t.tolist()]  # noqa: E731
    assert rounded((r - 1) - r.log()) == [0.1931, 0.3069, 0.0]
    assert rounded(-r.log()) == [0.6931, -0.6931, 0.0] and rounded(r.log() ** 2 / 2) == [0.2402, 0.2402, 0.0]
    assert rounded((1 / r - 1) + r.log()) == [0.3069, 0.1931, 0.0] and rounded(r - r.log()) == [1.1931, 1.3069, 1.0]


def test_the_grpo_messages_numbers():
    """The groups' means and stds (torch.std: G - 1 in the denominator), and what each scaling mistake divides by."""
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 3.0, 4.0, 8.0]], dtype=torch.float64)
    assert rewards.mean(dim=1).tolist() == [0.5, 4.0] and rewards.mean().item() == 2.25
    assert rewards.std(dim=1).tolist() == pytest.approx([math.sqrt(1 / 3), math.sqrt(26 / 3)])
    assert rewards.std(dim=1, unbiased=False)[0].item() == pytest.approx(0.5)
    assert round(rewards.std().item(), 4) == 2.7124
    assert [round(0.5 / (0.5 + 1e-4), 4), round(0.5 / (1 / 3 + 1e-4), 4), round(0.5 / (2.7124 + 1e-4), 4)] == \
        [0.9998, 1.4996, 0.1843]
    assert round(0.5 / (math.sqrt(1 / 3) + 1e-4), 4) == 0.8659
    assert (rewards[0] - rewards.mean(dim=0)).tolist() == [0.0, -1.5, -2.0, -3.5]

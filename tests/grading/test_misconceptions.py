"""Feedback that names the misconception (rlhf_course/grading/misconceptions.py; docs/grading.md).

Every catalogued wrong answer of the three assignments, handed in to each assignment and to its Chinese
edition and graded by the trusted grader (the in-process sandbox double; a few through the real sandbox
at the end), is named, and named right, in the student's language; wrong answers that are not in the
catalogue are never given a catalogued name; the same catalogued mistakes written in another style are
still named; correct answers, a grading with naming turned off and submissions that were not scored name
nothing; the feedback pages say it under the scores and still show nothing of the hidden tests."""
from __future__ import annotations

import copy
import html
import re
from dataclasses import asdict
from pathlib import Path

import pytest

from rlhf_course.grading import batch, editions, examples, instructor, misconceptions
from rlhf_course.course import notebooks, settings
from rlhf_course.grading.assignment import resolve
from rlhf_course.grading.pages.feedback import scores
from rlhf_course.course.limits import Limits
from rlhf_course.grading.results import TIMED_OUT, result_from_dict
from rlhf_course.grading.trusted import grade_submission
from rlhf_course.i18n import CHINESE, ENGLISH
from rlhf_course.course.settings import Course
from tests.support.course import REPO, copy_course, needs_sandbox, release_course, repo_course
from tests.support.english import english_phrases
from tests.support.in_process_sandbox import InProcessSandbox, grade_in_process

pytestmark = pytest.mark.slow  # one release (cached per run), then about 130 submissions graded in-process

BASES = {"rlhf": "rlhf_building_blocks.ipynb", "grpo": "grpo.ipynb", "kl_penalty": "kl_penalty.ipynb"}
EDITIONS = {base: (base, f"{base}_zh") for base in BASES}
LANGUAGE = {**{base: ENGLISH for base in BASES}, **{f"{base}_zh": CHINESE for base in BASES}}
CATALOGUES = {base: instructor.load_module(repo_course(), misconceptions.catalogue_module_name(base)) for base in BASES}
CHECKS = {base: instructor.checks_of(repo_course(), base) for base in BASES}
FUNCTION_OF_CELL = {"ppo_answer": "ppo_clipped_objective", "dpo_answer": "dpo_loss", "gae_answer": "compute_gae",
                    "grpo_answer": "group_relative_advantages", "kl_answer": "kl_estimator_k3"}
CELL_OF_FUNCTION = {function: cell for cell, function in FUNCTION_OF_CELL.items()}

# ----------------------------------------------------------------------------- wrong answers not in the catalogue

# Mistakes of our own, none of them in a catalogue: each must name nothing (expected None), unless it genuinely is a
# catalogued misconception, which the comment then says.  Several lose exactly the cells of a catalogued answer
# ("sig" below): the rule's second condition (the same messages) is what keeps them from that answer's name.
NOT_IN_CATALOGUE: dict[str, tuple[str, str, str | None]] = {
    # name: (base, source, the catalogue entry it must be named as, or None)
    "ppo_lower_bound_is_eps": ("rlhf", '''
def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    surr1 = ratio * advantage
    surr2 = torch.clamp(ratio, clip_epsilon, 1 + clip_epsilon) * advantage  # clip range [eps, 1 + eps]
    return torch.min(surr1, surr2).mean()
''', None),
    "ppo_mean_over_dim0": ("rlhf", '''
def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    surr1 = ratio * advantage
    surr2 = torch.clamp(ratio, 1 - clip_epsilon, 1 + clip_epsilon) * advantage
    return torch.min(surr1, surr2).mean(dim=0)  # a (B, T) batch gives T values
''', None),
    "ppo_clamps_the_advantage": ("rlhf", '''
def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    surr1 = ratio * advantage
    surr2 = ratio * torch.clamp(advantage, 1 - clip_epsilon, 1 + clip_epsilon)
    return torch.min(surr1, surr2).mean()
''', None),
    "ppo_no_reduction": ("rlhf", '''
def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    surr1 = ratio * advantage
    surr2 = torch.clamp(ratio, 1 - clip_epsilon, 1 + clip_epsilon) * advantage
    return torch.min(surr1, surr2)
''', None),
    "ppo_wrong_sign_on_clipped_term": ("rlhf", '''
def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    surr1 = ratio * advantage
    surr2 = -torch.clamp(ratio, 1 - clip_epsilon, 1 + clip_epsilon) * advantage
    return torch.min(surr1, surr2).mean()
''', None),
    "ppo_clips_the_log_ratio": ("rlhf", '''
def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    surr1 = ratio * advantage
    surr2 = torch.exp(torch.clamp(torch.log(ratio), -clip_epsilon, clip_epsilon)) * advantage
    return torch.min(surr1, surr2).mean()
''', None),
    # sig: loses exactly dpo_missing_beta's cells
    "dpo_log_sigmoid_of_the_swapped_margin": ("rlhf", '''
def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    margin = (log_p_l - ref_log_p_l) - (log_p_w - ref_log_p_w)
    return -F.logsigmoid(beta * margin)
''', None),
    # sig: loses exactly dpo_ignores_reference's cells
    "dpo_reference_with_the_wrong_sign": ("rlhf", '''
def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    margin = (log_p_w - log_p_l) + (ref_log_p_w - ref_log_p_l)
    return -F.logsigmoid(beta * margin)
''', None),
    "dpo_one_minus_sigmoid": ("rlhf", '''
def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    margin = (log_p_w - ref_log_p_w) - (log_p_l - ref_log_p_l)
    return 1 - torch.sigmoid(beta * margin)
''', None),
    # sig: loses exactly dpo_missing_beta's cells
    "dpo_divides_by_beta": ("rlhf", '''
def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    margin = (log_p_w - ref_log_p_w) - (log_p_l - ref_log_p_l)
    return -F.logsigmoid(margin / beta)
''', None),
    "dpo_wrong_sign_of_the_loss": ("rlhf", '''
def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    margin = (log_p_w - ref_log_p_w) - (log_p_l - ref_log_p_l)
    return F.logsigmoid(beta * margin)
''', None),
    "gae_next_value_off_by_one": ("rlhf", '''
def compute_gae(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
    T = len(rewards)
    advantages = torch.zeros_like(rewards)
    gae = 0.0
    for t in reversed(range(T)):
        next_v = next_value if t == T - 1 else values[t]  # V(s_t), not V(s_{t+1})
        delta = rewards[t] + gamma * next_v - values[t]
        gae = delta + gamma * gae_lambda * gae
        advantages[t] = gae
    return advantages
''', None),
    "gae_stores_before_the_update": ("rlhf", '''
def compute_gae(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
    T = len(rewards)
    advantages = torch.zeros_like(rewards)
    gae = 0.0
    for t in reversed(range(T)):
        next_v = next_value if t == T - 1 else values[t + 1]
        delta = rewards[t] + gamma * next_v - values[t]
        advantages[t] = gae  # A_{t+1} stored at t: the recursion off by one
        gae = delta + gamma * gae_lambda * gae
    return advantages
''', None),
    "gae_gamma_left_out_of_the_recursion": ("rlhf", '''
def compute_gae(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
    T = len(rewards)
    advantages = torch.zeros_like(rewards)
    gae = 0.0
    for t in reversed(range(T)):
        next_v = next_value if t == T - 1 else values[t + 1]
        delta = rewards[t] + gamma * next_v - values[t]
        gae = delta + gae_lambda * gae
        advantages[t] = gae
    return advantages
''', None),
    "gae_gamma_left_out_of_the_td_residual": ("rlhf", '''
def compute_gae(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
    T = len(rewards)
    advantages = torch.zeros_like(rewards)
    gae = 0.0
    for t in reversed(range(T)):
        next_v = next_value if t == T - 1 else values[t + 1]
        delta = rewards[t] + next_v - values[t]
        gae = delta + gamma * gae_lambda * gae
        advantages[t] = gae
    return advantages
''', None),
    "gae_returns_the_returns": ("rlhf", '''
def compute_gae(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
    T = len(rewards)
    advantages = torch.zeros_like(rewards)
    gae = 0.0
    for t in reversed(range(T)):
        next_v = next_value if t == T - 1 else values[t + 1]
        delta = rewards[t] + gamma * next_v - values[t]
        gae = delta + gamma * gae_lambda * gae
        advantages[t] = gae
    return advantages + values  # the lambda-returns, the value head's targets
''', None),
    # the std's normalisation, eps's place and the values (as the population std, and eps's cell)
    "grpo_divides_by_the_variance": ("grpo", '''
def group_relative_advantages(rewards, scale_by_std=True, eps=1e-4):
    if rewards.shape[1] < 2:
        return torch.zeros_like(rewards)
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    if not scale_by_std:
        return centred
    return centred / (rewards.var(dim=1, keepdim=True) + eps)
''', None),
    # sig: loses exactly the cells of grpo_batch_mean; its baseline is each column's mean over
    # the prompts, a mean over every prompt as the batch's is, but its messages are not the batch mean's: nothing named.
    "grpo_over_the_prompts": ("grpo", '''
def group_relative_advantages(rewards, scale_by_std=True, eps=1e-4):
    if rewards.shape[1] < 2:
        return torch.zeros_like(rewards)
    centred = rewards - rewards.mean(dim=0, keepdim=True)
    if not scale_by_std:
        return centred
    return centred / (rewards.std(dim=0, keepdim=True) + eps)
''', None),
    # the std's normalisation, eps's place and the values (as the population std, and eps's cell)
    "grpo_std_of_the_whole_batch": ("grpo", '''
def group_relative_advantages(rewards, scale_by_std=True, eps=1e-4):
    if rewards.shape[1] < 2:
        return torch.zeros_like(rewards)
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    if not scale_by_std:
        return centred
    return centred / (rewards.std() + eps)
''', None),
    # sig: loses exactly the cells of grpo_batch_mean
    "grpo_max_as_the_baseline": ("grpo", '''
def group_relative_advantages(rewards, scale_by_std=True, eps=1e-4):
    if rewards.shape[1] < 2:
        return torch.zeros_like(rewards)
    centred = rewards - rewards.max(dim=1, keepdim=True).values
    if not scale_by_std:
        return centred
    return centred / (rewards.std(dim=1, keepdim=True) + eps)
''', None),
    # sig: loses exactly the cells of kl_k1_instead_of_k3 and kl_mean_over_tokens
    "kl_negated_k3": ("kl_penalty", '''
def kl_estimator_k3(log_p, ref_log_p):
    d = ref_log_p - log_p
    return d - torch.expm1(d)
''', None),
    # The same misconception as kl_mean_over_tokens, genuinely: the per-token penalty reduced to one number over the
    # tokens (its explanation says "averaging (or summing)"); every message is about the shape, the same as the mean's.
    "kl_sum_over_tokens": ("kl_penalty", '''
def kl_estimator_k3(log_p, ref_log_p):
    d = ref_log_p - log_p
    return (torch.expm1(d) - d).sum()
''', "kl_mean_over_tokens"),
    "kl_ratio_of_the_log_probs": ("kl_penalty", '''
def kl_estimator_k3(log_p, ref_log_p):
    r = ref_log_p / log_p  # a ratio of logs, not the log of a ratio
    return (r - 1) - torch.log(r)
''', None),
    "kl_half_k3": ("kl_penalty", '''
def kl_estimator_k3(log_p, ref_log_p):
    d = ref_log_p - log_p
    return 0.5 * (torch.expm1(d) - d)
''', None),
    "kl_absolute_k1": ("kl_penalty", '''
def kl_estimator_k3(log_p, ref_log_p):
    return (log_p - ref_log_p).abs()
''', None),
}

# Those of them that lose exactly the cells of a catalogued answer (test_some_of_them_lose_exactly_...)
SHARING = {"dpo_log_sigmoid_of_the_swapped_margin", "dpo_reference_with_the_wrong_sign", "dpo_divides_by_beta",
           "grpo_over_the_prompts", "grpo_max_as_the_baseline", "kl_negated_k3"}

# Catalogued mistakes written in another style than the catalogue's: the rule does not depend on how they are written.
RESTYLED: dict[str, tuple[str, str, str]] = {
    "ppo_maximum_with_method_clamp": ("rlhf", '''
def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    clipped = ratio.clamp(min=1.0 - clip_epsilon, max=1.0 + clip_epsilon)
    return torch.maximum(advantage * ratio, advantage * clipped).mean()
''', "ppo_max_instead_of_min"),
    "dpo_softplus_without_beta": ("rlhf", '''
def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    return F.softplus(-((log_p_w - log_p_l) - (ref_log_p_w - ref_log_p_l)))
''', "dpo_missing_beta"),
    # log1p(exp(-z)) overflows where log(sigmoid(z)) underflows: the same unstable log-sigmoid, named as such
    "dpo_log1p_of_exp": ("rlhf", '''
def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    z = beta * ((log_p_w - ref_log_p_w) - (log_p_l - ref_log_p_l))
    return torch.log1p(torch.exp(-z))
''', "dpo_naive_log_sigmoid"),
    # The guide's bootstrap, V(s_T) = values[-1], the value before the last step: vectorised, with a mask of its own
    "gae_guide_bootstrap_vectorised": ("rlhf", '''
def compute_gae(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
    next_values = torch.cat([values[1:], values[-1:]])
    deltas = rewards + gamma * next_values - values
    advantages = torch.zeros_like(rewards)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = deltas[t] + gamma * gae_lambda * running
        advantages[t] = running
    return advantages
''', "gae_bootstraps_from_last_value"),
    "dpo_beta_times_softplus": ("rlhf", '''
def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    return beta * F.softplus(-((log_p_w - ref_log_p_w) - (log_p_l - ref_log_p_l)))
''', "dpo_beta_outside_the_sigmoid"),
    "gae_forwards_into_a_list": ("rlhf", '''
def compute_gae(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
    out, running = [], 0.0
    for t in range(len(rewards)):
        v_next = values[t + 1] if t + 1 < len(rewards) else next_value
        running = (rewards[t] + gamma * v_next - values[t]) + gamma * gae_lambda * running
        out.append(running)
    return torch.stack([torch.as_tensor(a, dtype=rewards.dtype) for a in out])
''', "gae_forward_recursion"),
    "grpo_variance_plus_eps_then_sqrt": ("grpo", '''
def group_relative_advantages(rewards, scale_by_std=True, eps=1e-4):
    if rewards.size(1) == 1:
        return torch.zeros_like(rewards)
    mean = rewards.mean(1, keepdim=True)
    if scale_by_std:
        return (rewards - mean) / (rewards.var(1, keepdim=True) + eps).sqrt()
    return rewards - mean
''', "grpo_eps_inside_sqrt"),
    "kl_k1_written_as_a_negated_d": ("kl_penalty", '''
def kl_estimator_k3(log_p, ref_log_p):
    return -(ref_log_p - log_p)
''', "kl_k1_instead_of_k3"),
}


# ----------------------------------------------------------------------------- the class


def _by_function(entries: list[tuple[str, str, str | None]]) -> list[dict[str, tuple[str, str | None]]]:
    """(function, source, expected) dealt into submissions: the k-th of each function together."""
    by_function: dict[str, list] = {}
    for function, source, expected in entries:
        by_function.setdefault(function, []).append((source, expected))
    count = max(len(v) for v in by_function.values())
    return [{f: group[k] for f, group in by_function.items() if k < len(group)} for k in range(count)]


def _function_of(source: str) -> str:
    return re.search(r"^def (\w+)\(", source, re.M).group(1)


def planned() -> dict[str, dict[str, tuple[str, dict]]]:
    """base -> student -> (kind, {function: (source, expected entry or None)}); each student is handed in to the
    base assignment and to its Chinese edition."""
    plan: dict[str, dict] = {}
    for base in BASES:
        students = {"reference": ("correct", {})}
        catalogue = CATALOGUES[base]
        wrong = [(FUNCTION_OF_CELL[w.answer_cell], w.source, w.name) for w in catalogue.WRONG_ANSWERS]
        for k, group in enumerate(_by_function(wrong)):
            students[f"catalogued_{k + 1}"] = ("catalogued", group)
        others = [(_function_of(s), s, e) for n, (b, s, e) in NOT_IN_CATALOGUE.items() if b == base]
        for k, group in enumerate(_by_function(others)):
            students[f"not_catalogued_{k + 1}"] = ("not catalogued", group)
        restyled = [(_function_of(s), s, e) for n, (b, s, e) in RESTYLED.items() if b == base]
        for k, group in enumerate(_by_function(restyled)):
            students[f"restyled_{k + 1}"] = ("restyled", group)
        correct = [(FUNCTION_OF_CELL[v.answer_cell], v.source, None) for v in catalogue.CORRECT_VARIANTS]
        for k, group in enumerate(_by_function(correct)):
            students[f"correct_variants_{k + 1}"] = ("correct", group)
        plan[base] = students
    return plan


PLAN = planned()


def answers(course: Path, base: str, group: dict) -> dict[str, str]:
    found = notebooks.solution_answers(notebooks.read(course / "source" / base / BASES[base]))
    for function, (source, _) in group.items():
        found[CELL_OF_FUNCTION[function]] = source
    return found


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    course = release_course(copy_course(tmp_path_factory.mktemp("misconceptions") / "course"))
    course_handle = Course.at(course)
    for base, students in PLAN.items():
        for assignment in EDITIONS[base]:
            for student, (_, group) in students.items():
                examples.write_submission(course_handle, student, answers(course, base, group), assignment=assignment,
                                          notebook=BASES[base])
    return course


@pytest.fixture(scope="module")
def graded(course):
    course_handle = Course.at(course)
    results = grade_in_process(course_handle, assignments=[a for base in BASES for a in EDITIONS[base]])
    return {(r.assignment, r.student): r for r in results}


def expected_names(base: str, group: dict) -> dict[str, str | None]:
    return {function: expected for function, (_, expected) in group.items()}


def named(result) -> dict[str, str]:
    return {m.function: m.entry for m in result.misconceptions}


def page_text(course: Path, result) -> str:
    """The feedback page as a student reads it: tags dropped, entities decoded."""
    page = (course / "feedback" / result.student / result.assignment / result.notebook.replace(".ipynb", ".html")).read_text()
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def the_line(misconception: misconceptions.Misconception, language: str) -> str:
    from rlhf_course.i18n import t
    return t("This looks like: {name} - {explanation} (see {section})", language, name=misconception.name[language],
             explanation=misconception.explanation[language],
             section=misconceptions.plain_heading(misconception.section[language]))


# ----------------------------------------------------------------------------- the catalogue's data


@pytest.mark.parametrize("base", BASES)
def test_every_catalogued_answer_has_its_misconception_in_both_languages(base):
    catalogue = CATALOGUES[base]
    assert set(catalogue.MISCONCEPTIONS) == {w.name for w in catalogue.WRONG_ANSWERS}
    for wrong in catalogue.WRONG_ANSWERS:
        m = catalogue.MISCONCEPTIONS[wrong.name]
        for language in (ENGLISH, CHINESE):
            assert m.name[language].strip() and m.explanation[language].strip() and m.section[language].strip()
            assert "\n" not in m.name[language] + m.explanation[language], wrong.name
        # one sentence: it ends once, with its full stop
        assert m.explanation[ENGLISH].endswith(".") and not re.search(r"(?<!Dr)\.\s+[A-Z]", m.explanation[ENGLISH]), wrong.name
        assert m.explanation[CHINESE].endswith("。") and m.explanation[CHINESE].count("。") == 1, wrong.name
        # the cells a wrong answer loses are one function's: the rule matches per function
        assert len({CHECKS[base][gid].function for gid in wrong.loses}) == 1, wrong.name


def _headings(path: Path) -> set[str]:
    nb = notebooks.read(path)
    return {line.lstrip("#").strip() for cell in nb.cells if cell.cell_type == "markdown"
            for line in cell.source.splitlines() if line.startswith("#")}


@pytest.mark.parametrize("base", BASES)
def test_each_section_is_a_heading_of_that_language_s_notebook(base):
    english = _headings(REPO / "source" / base / BASES[base])
    chinese = _headings(REPO / "source" / f"{base}_zh" / BASES[base])
    for name, m in CATALOGUES[base].MISCONCEPTIONS.items():
        assert m.section[ENGLISH] in english, (name, m.section[ENGLISH])
        assert m.section[CHINESE] in chinese, (name, m.section[CHINESE])


def test_the_chinese_texts_are_chinese_and_use_the_glossary_s_terms():
    terms = editions.glossary(repo_course(), CHINESE)
    assert terms
    for base in BASES:
        for name, m in CATALOGUES[base].MISCONCEPTIONS.items():
            for text in (m.name[CHINESE], m.explanation[CHINESE]):
                assert not english_phrases(text), (name, english_phrases(text))
                for entry in terms:
                    for variant in entry["variants"]:
                        assert not re.search(variant, text), (name, variant, entry["term"])


def test_no_misconception_text_is_released_or_in_the_package():
    shipped = [p for p in (REPO / "release").rglob("*") if p.is_file()]
    shipped += [p for p in (REPO / "rlhf_course").rglob("*.py")]
    texts = [text for base in BASES for m in CATALOGUES[base].MISCONCEPTIONS.values()
             for text in (m.explanation[ENGLISH], m.explanation[CHINESE])]
    for path in shipped:
        content = path.read_text(errors="replace")
        assert not [text for text in texts if text in content], path
    assert not list((REPO / "release").rglob("*catalogue*"))


# ----------------------------------------------------------------------------- naming, through the trusted grader


def _cases(kind: str):
    return [(base, assignment, student) for base, students in PLAN.items() for student, (k, _) in students.items()
            if k == kind for assignment in EDITIONS[base]]


@pytest.mark.parametrize("base,assignment,student", _cases("catalogued"))
def test_every_catalogued_answer_is_named_in_the_student_s_language(graded, course, base, assignment, student):
    group = PLAN[base][student][1]
    result = graded[(assignment, student)]
    assert result.state == "failed tests", result.detail
    assert named(result) == expected_names(base, group)
    language = LANGUAGE[assignment]
    text = page_text(course, result)
    for m in result.misconceptions:
        misconception = CATALOGUES[base].MISCONCEPTIONS[m.entry]
        assert (m.name, m.explanation, m.section) == (misconception.name[language], misconception.explanation[language],
                                                      misconception.section[language])
        assert the_line(misconception, language) in text, the_line(misconception, language)
    assert ("可能的误解：" in text) == (language == CHINESE) and ("This looks like:" in text) == (language == ENGLISH)


def test_the_catalogue_is_named_in_full(graded):
    """All 38 wrong answers, in both editions: nobody is left out by being in a shared group."""
    for base in BASES:
        for assignment in EDITIONS[base]:
            found = {m.entry for (a, _), r in graded.items() if a == assignment for m in r.misconceptions}
            wanted = {w.name for w in CATALOGUES[base].WRONG_ANSWERS}
            assert wanted <= found, (assignment, wanted - found)


@pytest.mark.parametrize("base,assignment,student", _cases("not catalogued"))
def test_wrong_answers_not_in_the_catalogue_are_never_misnamed(graded, base, assignment, student):
    group = PLAN[base][student][1]
    result = graded[(assignment, student)]
    assert result.state == "failed tests", result.detail
    expected = {f: e for f, e in expected_names(base, group).items() if e is not None}
    assert named(result) == expected, {f: s for f, (s, _) in group.items()}


def test_some_of_them_lose_exactly_a_catalogued_answer_s_cells(graded):
    """The cells alone would have misnamed these: the messages are what keeps them apart."""
    sharing = []
    for name, (base, source, expected) in NOT_IN_CATALOGUE.items():
        student = next(s for s, (k, group) in PLAN[base].items()
                       if k == "not catalogued" and any(src == source for src, _ in group.values()))
        result = graded[(base, student)]
        function = _function_of(source)
        lost = {g for g, c in result.cells.items() if c.score < c.points and CHECKS[base][g].function == function}
        if expected is None and any(set(w.loses) == lost for w in CATALOGUES[base].WRONG_ANSWERS):
            sharing.append(name)
    assert sorted(sharing) == sorted(name for name in NOT_IN_CATALOGUE if name in SHARING), sharing


@pytest.mark.parametrize("base,assignment,student", _cases("restyled"))
def test_a_catalogued_mistake_written_another_way_is_still_named(graded, base, assignment, student):
    group = PLAN[base][student][1]
    assert named(graded[(assignment, student)]) == expected_names(base, group)


@pytest.mark.parametrize("base,assignment,student", _cases("correct"))
def test_a_correct_submission_names_nothing(graded, course, base, assignment, student):
    result = graded[(assignment, student)]
    assert (result.state, result.misconceptions) == ("graded", [])
    assert "This looks like" not in page_text(course, result) and "可能的误解" not in page_text(course, result)


def test_a_submission_that_was_not_scored_names_nothing(graded, course):
    result = graded[("grpo", "catalogued_1")]
    assert result.misconceptions
    checks = resolve(settings.Course.at(course), "grpo").checks
    stopped = copy.deepcopy(result)
    stopped.state = TIMED_OUT  # the same lost cells, but a time-out's zeros
    assert misconceptions.name_misconceptions(stopped, Course.at(course), "grpo", checks) == []
    assert misconceptions.name_misconceptions(copy.deepcopy(result), Course.at(course), "grpo", checks) == result.misconceptions


def test_a_malformed_submission_names_nothing(course):
    course_handle = Course.at(course)
    folder = examples.write_submission(course_handle, "half_a_notebook", answers(course, "kl_penalty", {}), assignment="kl_penalty",
                                       notebook=BASES["kl_penalty"])
    path = folder / BASES["kl_penalty"]
    path.write_text(path.read_text()[: len(path.read_text()) // 2])
    result = grade_submission(settings.Course.at(course), resolve(settings.Course.at(course), "kl_penalty"),
                              "half_a_notebook", BASES["kl_penalty"], sandbox=InProcessSandbox)
    assert (result.state, result.misconceptions) == ("malformed notebook", [])


def test_turned_off_nothing_is_named(course):
    off = settings.Course.at(course).with_config(TrustedGrading={"name_misconceptions": False})
    assert off.grading.name_misconceptions is False and settings.Course.at(course).grading.name_misconceptions is True
    for assignment in ("rlhf", "kl_penalty_zh"):
        result = grade_submission(off, resolve(off, assignment), "catalogued_1", BASES[assignment.removesuffix("_zh")],
                                  sandbox=InProcessSandbox)
        assert result.state == "failed tests" and result.misconceptions == []
        assert scores(result)["misconceptions"] == []


def test_the_setting_is_read_from_the_course_s_config(tmp_path):
    copy_of = copy_course(tmp_path / "course")
    with open(copy_of / "nbgrader_config.py", "a") as config:
        config.write("\nc.TrustedGrading.name_misconceptions = False\n")
    assert settings.Course.at(copy_of).grading.name_misconceptions is False
    assert "name_misconceptions" in settings.TrustedGrading.class_get_help()


def test_named_misconceptions_travel_as_a_dask_result_does(graded):
    result = graded[("rlhf_zh", "catalogued_1")]
    assert len(result.misconceptions) == 3  # one per function
    again = result_from_dict(asdict(result))
    assert again.misconceptions == result.misconceptions and again == result


# ----------------------------------------------------------------------------- the feedback page


def test_the_lines_stand_in_the_summary_above_the_scores_table(graded, course):
    result = graded[("rlhf", "catalogued_1")]
    text = page_text(course, result)
    outcome, table = text.index("Outcome:"), text.index("Tests: ")  # the summary is between them
    lines = misconceptions.misconception_lines(result)
    assert len(lines) == 3 and all(outcome < text.index(line) < table for line in lines)
    bare = copy.deepcopy(result)
    bare.misconceptions = []
    assert {**scores(result), "misconceptions": []} == scores(bare)  # nothing else changes


def test_pages_that_name_a_misconception_show_nothing_of_the_hidden_tests(graded, course):
    """The checks of tests/grading/test_batch.py and test_chinese_edition.py, on every page that names one; and the
    named sentences hold nothing of a hidden test's inputs (its cases' notes and values)."""
    from rlhf_course.grading.checks import short
    pages = [(r, page_text(course, r)) for r in graded.values() if r.misconceptions]
    assert len(pages) >= 50
    for result, _ in pages:
        raw = (course / "feedback" / result.student / result.assignment
               / result.notebook.replace(".ipynb", ".html")).read_text()
        for secret in ("run_check", "_hidden_checks", "BEGIN HIDDEN", "BEGIN SOLUTION",
                       "_catalogue", "MISCONCEPTIONS"):
            assert secret not in raw, (result.assignment, result.student, secret)
    said = " ".join(f"{m.name} {m.explanation} {m.section}" for r, _ in pages for m in r.misconceptions)
    for base in BASES:
        public = (REPO / "release" / base / BASES[base]).read_text()  # what the student's copy says anyway
        for check in CHECKS[base].values():
            if check.visible:
                continue
            for case in check.cases():
                if case.note and case.note not in public:
                    assert case.note not in said, case.note
                for arg in case.args:
                    if hasattr(arg, "numel") and arg.numel() > 1:
                        assert short(arg).strip("[]") not in said, short(arg)


# ----------------------------------------------------------------------------- the real sandbox


@needs_sandbox
def test_one_per_assignment_through_the_real_sandbox(course):
    """A catalogued answer of each assignment (one in the Chinese edition), graded by `batch.grade_all` with the
    real sandbox: named as through the double."""
    picks = {"rlhf": "ppo_clip_without_min", "grpo_zh": "grpo_eps_hard_coded", "kl_penalty": "kl_mean_over_tokens"}
    course_handle = Course.at(course)
    for assignment, name in picks.items():
        base = assignment.removesuffix("_zh")
        wrong = next(w for w in CATALOGUES[base].WRONG_ANSWERS if w.name == name)
        group = {FUNCTION_OF_CELL[wrong.answer_cell]: (wrong.source, name)}
        examples.write_submission(course_handle, f"sandboxed_{base}", answers(course, base, group), assignment=assignment,
                                  notebook=BASES[base])
    results = batch.grade_all(course_handle, workers=1, show_progress=False, export=False,
                              students=[f"sandboxed_{a.removesuffix('_zh')}" for a in picks],
                              assignments=list(picks), limits=Limits(call_seconds=10.0, feedback_seconds=30.0))
    got = {r.assignment: [m.entry for m in r.misconceptions] for r in results if r.student.startswith("sandboxed_")}
    assert got == {a: [n] for a, n in picks.items()}, [(r.assignment, r.state, r.detail) for r in results]
    zh = next(r for r in results if r.assignment == "grpo_zh")
    assert "可能的误解：" + CATALOGUES["grpo"].MISCONCEPTIONS["grpo_eps_hard_coded"].name[CHINESE] in page_text(course, zh)
